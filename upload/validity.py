"""The validity gate: refuse runs that 'succeeded' without a usable result.

* 0 generated tokens (timing.json total_output_tokens, or Output TPS when the
  token count is absent);
* failed_requests / num_requests above --max-failed-fraction;
* a speculative run whose Average_AL is missing or below 1.
"""

from __future__ import annotations

import math

OVERRIDE = "--allow-invalid"
DEFAULT_MAX_FAILED_FRACTION = 0.05


def _number(doc: dict, name: str, file: str) -> float | None:
    """The numeric field, None when absent; ValueError when it is not a number."""
    if name not in doc or doc[name] is None:
        return None
    value = doc[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{file}: {name} must be a finite number, found {value!r}")
    return float(value)


def is_speculative(config: dict | None, acceptance: dict | None) -> bool:
    spec = (config or {}).get("speculative_config")
    if isinstance(spec, dict):
        method = spec.get("method")
        if method is not None and str(method).strip().lower() not in ("none", "null", ""):
            return True
    return bool(acceptance and acceptance.get("speculative") is True)


def _token_problem(timing: dict) -> str | None:
    tokens = _number(timing, "total_output_tokens", "timing.json")
    if tokens is None:
        tps = _number(timing, "Output TPS", "timing.json")
        if tps is None:
            return "timing.json has neither total_output_tokens nor Output TPS"
        if tps <= 0:
            return f"the run generated no tokens (timing.json Output TPS = {tps:g})"
        return None
    if tokens <= 0:
        return "the run generated 0 tokens (timing.json total_output_tokens = 0)"
    return None


def _failure_problem(timing: dict, max_fraction: float) -> str | None:
    failed = _number(timing, "failed_requests", "timing.json")
    if failed is None:
        return None
    total = _number(timing, "num_requests", "timing.json")
    if total is None:
        return "timing.json has failed_requests but no num_requests"
    if total <= 0:
        return "timing.json: num_requests is 0; the run sent no requests"
    fraction = failed / total
    if fraction > max_fraction:
        return (
            f"{failed:g} of {total:g} requests failed ({fraction:.1%} > {max_fraction:.1%} "
            "allowed by --max-failed-fraction)"
        )
    return None


def _acceptance_problem(acceptance: dict | None) -> str | None:
    if acceptance is None:
        return "speculative run without acceptance_rate.json"
    al = _number(acceptance, "Average_AL", "acceptance_rate.json")
    if al is None:
        return "speculative run: acceptance_rate.json has no Average_AL"
    if al < 1:
        return f"speculative run with Average_AL {al:g} < 1 (acceptance_rate.json)"
    return None


def gate_problems(
    config: dict | None,
    timing: dict | None,
    acceptance: dict | None,
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION,
) -> list[str]:
    """One line per reason the run is not a valid result, each ending with the override."""
    problems: list[str] = []
    checks = []
    if timing is None:
        problems.append("timing.json missing: cannot tell whether the run generated tokens")
    else:
        checks += [lambda: _token_problem(timing), lambda: _failure_problem(timing, max_failed_fraction)]
    if is_speculative(config, acceptance):
        checks.append(lambda: _acceptance_problem(acceptance))
    for check in checks:
        try:
            problem = check()
        except ValueError as exc:
            problem = str(exc)
        if problem:
            problems.append(problem)
    return [f"{p}; rerun the point, or pass {OVERRIDE} to upload it anyway" for p in problems]
