"""The verdict of one measurement against a golden reference (docs/golden.md): each figure
against the entry's with its tolerance (the entry's relative one or the sampling noise of the
two counts, launcher.stats.acceptance_noise, the wider), the workload and the platform compared, the
likely causes of a failure. Pure, standard library."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Mapping, Optional, Sequence

from launcher.stats.acceptance_noise import Z, accepted_variance, noise_tolerance, rate_variance

# What lowers a measured acceptance below a sound reference, most likely first.
LIKELY_CAUSES = (
    "chat template: the prompt is not formatted as the reference's (a missing or different template, "
    "thinking on/off)",
    "doubled BOS: the template and the tokenizer both add <s> (about 5% of acceptance)",
    "wrong draft revision: the draft checkpoint is not the one the reference used (pin draft.extra.revision)",
    "sampler defect: the engine's rejection sampler (try the target as its own draft: bench.known_answer=true)",
    "workload mismatch: prompts, turns, output tokens, temperature or k differ from the reference's",
)

# A difference in these makes the comparison meaningless (verdict "not_comparable");
# concurrency is reported but judged harmless (the batch changes numerics, not the draft).
STRICT_KEYS = ("dataset", "num_prompts", "turns", "output_tokens", "temperature", "k")


def workload_differences(entry: Mapping, run: Mapping) -> list[str]:
    """Where the run's workload is not the entry's (keys of ``run`` that are absent are not judged)."""
    w = dict(entry.get("workload") or {})
    w["k"] = entry.get("k")
    w["dataset"] = entry.get("dataset")
    out = []
    for key in ("dataset", "num_prompts", "turns", "output_tokens", "temperature", "k", "concurrency"):
        if run.get(key) is None or w.get(key) is None:
            continue
        if (float(run[key]) != float(w[key])) if key not in ("dataset",) else run[key] != w[key]:
            out.append(f"{key} {run[key]} (reference {w[key]})")
    return out


# A figure is judged only when its noise tolerance is below this share of what it
# measures (a rate; the AL's accepted part, AL - 1): above it, even the loss of half
# the figure would pass as noise, so a verdict on it would say nothing.
JUDGEABLE_SHARE = 0.5

PASS, FAIL, TOO_SMALL, NOT_COMPARABLE = "pass", "fail", "too_small_to_judge", "not_comparable"



@dataclass(frozen=True)
class Platform:
    """Where a reference or a run was recorded (the entry's ``recorded_on``, a point's
    configuration.json ``specdec_launcher.recorded_on``): numerics, and so T=0 trajectories,
    follow these. The one definition of its keys (PLATFORM_KEYS); None: not known."""
    engine: Optional[str]
    version: Optional[str]
    build: Optional[str]  # cpu | cuda
    cpu_kernel: Optional[str]  # the CPU attention kernel the engine picks (amx / avx512 / avx2)
    gpu: Optional[str]  # the GPU's name
    dtype: Optional[str]  # the served dtype

    def as_dict(self) -> dict:
        return asdict(self)


PLATFORM_KEYS = tuple(f.name for f in fields(Platform))


def _judge(measured: float, expected: float, baseline: float, rtol: float, rule: str, variance: Optional[float],
           n: Optional[float], n_ref: Optional[float]) -> dict:
    """One figure: its tolerance (the relative one or the noise, the wider) and status.
    ``baseline`` is the figure's value when nothing is accepted (0 for a rate, 1 for AL).
    Without the run's sample size (n None) the noise is unknown: the relative
    tolerance alone judges, as the reference's own rule does."""
    rel = rtol * expected
    noise = None if n is None or variance is None else noise_tolerance(variance, n, n_ref)
    tol = rel if noise is None else max(rel, noise)
    judgeable = noise is None or noise < JUDGEABLE_SHARE * (expected - baseline)
    eps = 1e-9 * max(1.0, abs(expected))  # the edge itself passes, whatever the float rounding
    ok = measured >= expected - tol - eps if rule == "at_least" else abs(measured - expected) <= tol + eps
    status = TOO_SMALL if not judgeable else PASS if ok else FAIL
    return {"measured": measured, "expected": expected, "tolerance": round(tol, 4),
            "noise_tolerance": None if noise is None else round(noise, 4), "rtol_tolerance": round(rel, 4),
            "rule": rule, "status": status, "ok": status != FAIL}


def platform_differences(reference: Optional[Mapping], run: Optional[Mapping]) -> list[str]:
    """What differs between where the reference was recorded and where the run ran
    ("cpu_kernel amx (reference avx512)"); a key the reference did not record is named
    as such when the run knows it; keys the run does not know are left out."""
    reference, run = dict(reference or {}), dict(run or {})
    out = []
    for key in PLATFORM_KEYS:
        mine, theirs = run.get(key), reference.get(key)
        if mine is None or (theirs is not None and str(mine) == str(theirs)):
            continue
        out.append(f"{key} {mine} (reference {'not recorded' if theirs is None else theirs})")
    return out


def check(entry: Mapping, measured_al: Optional[float], measured_rates: Optional[Sequence[float]],
          run: Optional[Mapping] = None, num_drafts: Optional[float] = None,
          recorded_on: Optional[Mapping] = None) -> dict:
    """The verdict of one measurement against ``entry`` (a table row with its ``id``):
    ``pass``, ``fail``, ``too_small_to_judge`` (no figure could be judged at this sample
    size) or ``not_comparable`` (another workload). ``num_drafts``: the verify steps the
    run counted; ``recorded_on``: where it ran (PLATFORM_KEYS)."""
    rtol = float(entry["rtol"])
    n_ref = entry.get("num_drafts")
    problems: list[str] = []
    exp_rates = entry.get("expected_rates")
    rates_for_noise = exp_rates or measured_rates  # the AL's per-step variance
    al_v = None
    if measured_al is None:
        problems.append("no acceptance length was measured")
    else:
        var = accepted_variance(rates_for_noise) if rates_for_noise else None
        al_v = _judge(measured_al, entry["expected_al"], 1.0, rtol, entry.get("al_check") or "within", var,
                      num_drafts, n_ref)
        if al_v["status"] == FAIL:
            problems.append(f"AL {measured_al:.4f} vs expected {entry['expected_al']} "
                            f"(tolerance {al_v['tolerance']:.4f})")
    pos = []
    if exp_rates:
        rule = entry.get("per_position_check") or "within"
        if not measured_rates or len(measured_rates) < len(exp_rates):
            problems.append(f"per-position rates missing (need {len(exp_rates)} positions)")
        else:
            for i, (m, e) in enumerate(zip(measured_rates, exp_rates), start=1):
                if e <= 0:  # nothing expected, nothing to lose
                    pos.append({"position": i, "measured": m, "expected": e, "tolerance": 0.0,
                                "noise_tolerance": None, "rtol_tolerance": 0.0, "rule": rule, "status": PASS,
                                "ok": True})
                    continue
                v = {"position": i, **_judge(m, e, 0.0, rtol, rule, rate_variance(e), num_drafts, n_ref)}
                pos.append(v)
                if v["status"] == FAIL:
                    problems.append(f"position {i} rate {m:.4f} vs expected {e} (tolerance {v['tolerance']:.4f})")
    figures = ([] if al_v is None else [al_v]) + pos
    not_judged = (["AL"] if al_v is not None and al_v["status"] == TOO_SMALL else []) + \
        [f"position {p['position']}" for p in pos if p["status"] == TOO_SMALL]
    diffs = workload_differences(entry, run or {})
    platform = platform_differences(entry.get("recorded_on"), recorded_on)
    comparable = not [d for d in diffs if d.split(" ", 1)[0] in STRICT_KEYS]
    if not comparable:
        verdict = NOT_COMPARABLE
    elif problems:
        verdict = FAIL
    elif figures and all(f["status"] == TOO_SMALL for f in figures):
        verdict = TOO_SMALL
    else:
        verdict = PASS
    causes: list[str] = []
    if verdict == FAIL:
        causes = list(LIKELY_CAUSES)
        if diffs:  # a known difference goes first
            causes = [f"workload mismatch: {'; '.join(diffs)}"] + [c for c in causes
                                                                  if not c.startswith("workload mismatch")]
        if platform:
            causes = [f"another platform: {'; '.join(platform)} (other numerics change greedy "
                      "trajectories)"] + causes
        if al_v is not None and al_v["status"] == FAIL and measured_al > entry["expected_al"]:
            causes = ["above the reference: the workload differs (shorter outputs, other prompts) or the "
                      "reference is out of date"] + causes
    return {
        "id": entry.get("id"),
        "verdict": verdict,
        "measured_al": measured_al, "expected_al": entry["expected_al"],
        "al_definition": entry.get("al_definition", "pooled"),
        "measured_rates": list(measured_rates) if measured_rates else None,
        "expected_rates": list(exp_rates) if exp_rates else None,
        "al": al_v, "positions": pos, "rtol": rtol, "al_check": entry.get("al_check") or "within",
        "per_position_check": entry.get("per_position_check"),
        "num_drafts": num_drafts, "reference_num_drafts": n_ref, "z": Z, "judgeable_share": JUDGEABLE_SHARE,
        "not_judged": not_judged,
        "problems": problems, "workload_differences": diffs, "likely_causes": causes,
        "recorded_on": dict(recorded_on) if recorded_on else None,
        "reference_recorded_on": entry.get("recorded_on"), "platform_differences": platform,
        "source": entry.get("source"), "commit": entry.get("commit"),
    }


def overall(verdicts: Sequence[str]) -> str:
    """The job's golden verdict from its points': a fail fails it; else a pass passes it;
    else too small to judge; else not comparable."""
    for word in (FAIL, PASS, TOO_SMALL):
        if word in verdicts:
            return word
    return NOT_COMPARABLE
