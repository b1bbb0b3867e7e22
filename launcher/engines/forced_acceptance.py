"""Forced (synthetic) acceptance: vLLM's own mechanism for running the serving
system at a chosen acceptance, whatever the draft proposes.

vLLM's ``--speculative-config`` keys (vllm/config/speculative.py, read at
commit 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443; present in 0.26 and 0.32):
``rejection_sample_method: "synthetic"`` with exactly one of
``synthetic_acceptance_length`` (mean AL in [1, k+1]) or
``synthetic_acceptance_rates`` (k unconditional per-position rates in [0, 1],
non-increasing). vLLM's sampler refuses it on the CPU ("Synthetic acceptance
not supported with CPU sampling", on the first request), so it is refused here
before any server starts.

The method does not matter to it in vLLM 0.26.0 (read in the CUDA wheel: the
speculative config's check takes only num_speculative_tokens and the rates;
v1/sample/rejection_sampler.py applies the rates whatever proposed the drafts;
no code path compares ``rejection_sample_method`` with ``dflash`` or ``eagle3``),
so DFlash and EAGLE3 take it as draft_model does: METHODS_REFUSING_FORCED is
empty. Pure functions, standard library only.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from launcher.stats.acceptance_noise import Z, accepted_variance, noise_tolerance  # noqa: F401 (Z: the one definition)

SYNTHETIC = "synthetic"
METHOD_KEY = "rejection_sample_method"
LENGTH_KEY = "synthetic_acceptance_length"
RATES_KEY = "synthetic_acceptance_rates"
FIELD = "draft.forced_acceptance"
# Speculative methods whose forced acceptance vLLM refuses (method -> its message): none in 0.26.
METHODS_REFUSING_FORCED: dict[str, str] = {}


def speculative_keys(length: Optional[float], rates: Optional[Sequence[float]]) -> dict:
    """The keys to merge into vLLM's speculative config ({} when nothing is forced)."""
    if length is not None:
        return {METHOD_KEY: SYNTHETIC, LENGTH_KEY: float(length)}
    if rates is not None:
        return {METHOD_KEY: SYNTHETIC, RATES_KEY: [float(r) for r in rates]}
    return {}


def problems(length: Optional[float], rates: Optional[Sequence[float]], k: int,
             method: str) -> list[tuple[str, str, str]]:
    """(field, problem, fix) for each way the setting cannot work with k drafts."""
    out = []
    if length is None and rates is None:
        return out
    if method == "none":
        out.append((FIELD, "is set without speculation (draft.method=none)",
                    "pick a draft (any method: the acceptance is forced) or remove draft.forced_acceptance"))
    elif method in METHODS_REFUSING_FORCED:
        out.append((FIELD, f"vLLM refuses it with method {method} ({METHODS_REFUSING_FORCED[method]})",
                    "remove draft.forced_acceptance and measure the draft's own acceptance"))
    if length is not None and rates is not None:
        out.append((FIELD, "sets both length and rates", "set only one of .length or .rates"))
    if length is not None and not 1.0 <= float(length) <= k + 1:
        out.append((f"{FIELD}.length", f"is {length}, outside [1, k+1] = [1, {k + 1}] for k={k}",
                    f"use a mean acceptance length between 1 and {k + 1}"))
    if rates is not None:
        rates = list(rates)
        if len(rates) != k:
            out.append((f"{FIELD}.rates", f"has {len(rates)} values, k is {k}", f"give {k} rates, one per position"))
        if any(not 0.0 <= float(r) <= 1.0 for r in rates):
            out.append((f"{FIELD}.rates", f"{rates} has a value outside [0, 1]", "use probabilities in [0, 1]"))
        if any(float(rates[i]) > float(rates[i - 1]) for i in range(1, len(rates))):
            out.append((f"{FIELD}.rates", f"{rates} increases", "per-position rates must be non-increasing "
                        "(rate i = P(the first i drafts are all accepted))"))
    return out


# ---------------------------------------------------------------- the sweep axis

SWEEP_FIELD = "sweep.forced_acceptance_lengths"
ALL_ACCEPTED = "k+1"  # every draft accepted: the forced length k + 1 of each k


def resolve_length(level, k: int) -> float:
    """One value of sweep.forced_acceptance_lengths at k: a number, or "k+1" (k + 1)."""
    if isinstance(level, str) and level.replace(" ", "").lower() == ALL_ACCEPTED:
        return float(k + 1)
    return float(level)


def sweep_problems(levels: Sequence, ks: Sequence[int], method: str, length: Optional[float],
                   rates: Optional[Sequence[float]]) -> list[tuple[str, str, str]]:
    """(field, problem, fix) for sweep.forced_acceptance_lengths: one server per (k, level)."""
    out: list[tuple[str, str, str]] = []
    if not levels:
        return out
    if method == "none":
        out.append((SWEEP_FIELD, "is set without speculation (draft.method=none)",
                    "pick a draft (any method: the acceptance is forced) or set sweep.forced_acceptance_lengths=[]"))
    elif method in METHODS_REFUSING_FORCED:
        out.append((SWEEP_FIELD, f"vLLM refuses forced acceptance with method {method} "
                    f"({METHODS_REFUSING_FORCED[method]})", "set sweep.forced_acceptance_lengths=[] and measure the "
                    "draft's own acceptance"))
    if length is not None or rates is not None:
        out.append((SWEEP_FIELD, "is set together with draft.forced_acceptance",
                    "keep one: the sweep's lengths or draft.forced_acceptance (remove .length/.rates)"))
    seen: list = []
    for level in levels:
        if isinstance(level, bool) or not (isinstance(level, (int, float)) or
                                           (isinstance(level, str) and _number_or_all(level))):
            out.append((SWEEP_FIELD, f"contains {level!r}, neither a number nor '{ALL_ACCEPTED}'",
                        f"use mean acceptance lengths such as [1.5,2.5,{ALL_ACCEPTED}]"))
            continue
        key = level.replace(" ", "").lower() if isinstance(level, str) and not _is_number(level) else float(level)
        if key in seen:
            out.append((SWEEP_FIELD, f"lists {level} more than once", "list each value once"))
        seen.append(key)
        for k in ks:
            v = resolve_length(level, k)
            if not 1.0 <= v <= k + 1:
                out.append((SWEEP_FIELD, f"contains {level}, outside [1, k+1] = [1, {k + 1}] for k={k}",
                            f"use lengths between 1 and {k + 1} (or '{ALL_ACCEPTED}': every draft accepted)"))
    return out


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _number_or_all(s: str) -> bool:
    return _is_number(s) or s.replace(" ", "").lower() == ALL_ACCEPTED


def forced_from_speculative_config(spec: Optional[Mapping]) -> Optional[dict]:
    """{"length": x} or {"rates": [...]} when a speculative config forces acceptance, else None."""
    if not spec or spec.get(METHOD_KEY) != SYNTHETIC:
        return None
    if spec.get(LENGTH_KEY) is not None:
        return {"length": spec[LENGTH_KEY]}
    return {"rates": spec.get(RATES_KEY)}


def label(forced: Optional[Mapping]) -> str:
    """'forced AL 2.5' / 'forced rates [0.9, 0.5, 0.1]' / ''."""
    if not forced:
        return ""
    if forced.get("length") is not None:
        return f"forced AL {forced['length']:g}"
    return "forced rates [" + ", ".join(f"{r:g}" for r in forced.get("rates") or []) + "]"


# ---------------------------------------------------------------- the known answer

# A forced run's server counters must give the forced AL up to the sampling noise of the
# mechanism: Z standard errors of the mean accepted drafts per step (launcher.stats.acceptance_noise,
# the one definition), and at least FLOOR (an integer length has no noise at all).
FLOOR = 0.005


def expected_rates(forced: Mapping, k: int) -> list[float]:
    """The unconditional per-position rates the mechanism draws from: the given rates,
    or for a length L the minimum-variance schedule (floor(L-1) positions always accepted,
    the next with the fractional part), which is how vLLM spends a forced length."""
    if forced.get("rates") is not None:
        return [float(r) for r in forced["rates"]][:k]
    extra = float(forced["length"]) - 1.0
    whole = int(extra)
    rates = [1.0] * min(whole, k)
    if whole < k:
        rates.append(extra - whole)
    return (rates + [0.0] * k)[:k]


def cut_allowance(forced: Mapping, k: int, num_drafts: float, cut_requests: Optional[float]) -> float:
    """How far below the forced AL a count of emitted tokens may fall because each request's
    last verify step is cut at max_tokens: up to the most drafts a step accepts (L - 1 for an
    integer length, which every step accepts; k otherwise) lost once per finished request.
    0 where the counters count drafts accepted before the cut (``cut_requests`` None)."""
    if not cut_requests or not num_drafts:
        return 0.0
    length = forced.get("length")
    most = (min(k, int(length) - 1) if length is not None and float(length).is_integer() else k)
    return float(cut_requests) * most / float(num_drafts)


def verdict(forced: Mapping, k: int, num_drafts: float, num_accepted: float, draws: Optional[float] = None,
            cut_requests: Optional[float] = None) -> dict:
    """Measured (the server's counters: 1 + accepted / drafts, the mechanism's own
    definition) against forced. Per step the accepted count A has P(A >= i) = rate i, so
    E[A] = sum(rates) and E[A^2] = sum((2i - 1) * rate i); the tolerance is Z standard
    errors of the mean over the draws (launcher.stats.acceptance_noise): one per draft counted, or
    ``draws`` where the mechanism draws once for many (SGLang: once per batch's verify step).
    ``cut_requests``: the requests finished in the window where the counters count emitted tokens
    (SGLang): each one's last step may be cut at max_tokens, so the measured AL may also fall
    below by :func:`cut_allowance` (``cut_allowance`` in the verdict)."""
    rates = expected_rates(forced, k)
    var = accepted_variance(rates)
    expected = 1.0 + sum(rates)
    if not num_drafts:
        return {"expected_al": round(expected, 4), "measured_al": None, "num_drafts": 0, "tolerance": None,
                "passed": None}
    measured = 1.0 + float(num_accepted) / float(num_drafts)
    tol = noise_tolerance(var, min(float(num_drafts), float(draws)) if draws else num_drafts, floor=FLOOR)
    cut = cut_allowance(forced, k, num_drafts, cut_requests)
    out = {"expected_al": round(expected, 4), "measured_al": round(measured, 4), "num_drafts": int(num_drafts),
           "tolerance": round(tol, 4), "passed": -(tol + cut) <= measured - expected <= tol}
    return out | ({"cut_allowance": round(cut, 4)} if cut_requests else {})


def run_verdicts(forced: Mapping, k: int, prometheus_runs: Sequence[Mapping],
                 batch_of: Optional[Mapping[str, int]] = None) -> dict:
    """The verdict of each multi-point run (one per dataset and temperature) and of the job:
    "pass", "fail", or "unknown" where the server's counters were not read. ``batch_of``
    (point -> its concurrency) where the engine draws one length per batch step: a run's draws
    are then taken as its drafts over its largest batch (fewer than it made: a wider tolerance)."""
    runs = []
    for r in prometheus_runs:
        biggest = max((int((batch_of or {}).get(p) or 1) for p in r.get("points") or []), default=1)
        v = verdict(forced, k, r.get("num_drafts") or 0, r.get("num_accepted_tokens") or 0,
                    draws=(r.get("num_drafts") or 0) / biggest if batch_of else None,
                    cut_requests=r.get("finished_requests"))
        runs.append({"dataset": r.get("dataset"), "temperature": r.get("temperature"),
                     "points": list(r.get("points") or []), **v})
    known = [r["passed"] for r in runs if r["passed"] is not None]
    overall = "unknown" if not known else "pass" if all(known) else "fail"
    return {"forced": dict(forced), "k": k, "verdict": overall, "runs": runs}


def verdict_line(result: Mapping) -> str:
    """One line for the job log and the launcher's table."""
    parts = [f"{r['dataset']} T={r['temperature']:g}: measured {r['measured_al']} vs {r['expected_al']} "
             f"(tolerance {r['tolerance']}" + (f", last steps cut at max_tokens: -{r['cut_allowance']}"
                                               if r.get("cut_allowance") else "") + ")" for r in result.get("runs") or [] if r.get("measured_al") is not None]
    return f"{label(result.get('forced'))}: {result.get('verdict', 'unknown').upper()}" + \
        (" (" + "; ".join(parts) + ")" if parts else " (no server counters read)")
