"""Each repeat's figures and the point's ``repeats.json`` (docs/repeats.md).

specdec_bench's files (``acceptance_rate.json``, ``timing.json``, the responses,
``aiperf/``) hold ONE repeat, whole: the repeat whose Output TPS is the median
of the repeats (the lower median for an even N, the first on a tie). A pooled
file would break specdec_bench's definitions: Output TPS is tokens over one
run's span (the repeats are separated by other points' phases), and Request_AL
is keyed by question, once. ``repeats.json`` holds every repeat's figures and
their statistics. Standard library only.
"""
from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Optional, Sequence

from launcher.results.layout import EXTENSION_KEY
from launcher.stats.repeats import NOISY_REL_MAD, Summary, summarize
from launcher.results.point import stat

REPEATS_FILE = "repeats.json"
REPEATS_ARTIFACTS = "aiperf_repeats"   # <point>/aiperf_repeats/r<i>/: the other repeats' AIPerf records
SCHEMA_VERSION = 1
HOLD_RULE = "the repeat with the median Output TPS (lower median for an even count; first on a tie)"

# The figures kept per repeat: (key, what it is). Timing figures are medians over the
# repeat's requests, in seconds (specdec_bench's unit).
FIGURES = {
    "Output TPS": "output tokens / the repeat's span (specdec_bench's Output TPS)",
    "TTFT s": "median time to first token",
    "TPOT s": "median time per output token after the first: (E2E - TTFT) / (tokens - 1)",
    "E2E s": "median end-to-end request time",
    "Decode tok/s": "median per-user decode speed: (tokens - 1) / (last token - first token)",
    "Average_AL": "specdec_bench's Average_AL (chunk lengths, per-request mean)",
}
# The figure a point's "noisy" mark rests on (vLLM's tune_speculative_k rule on throughput).
NOISE_FIGURE = "Output TPS"


def _median_stat(doc: dict, name: str) -> Optional[float]:
    return stat(doc, name, "median")


def repeat_figures(acceptance: dict, timing_doc: dict, records: Sequence = ()) -> dict:
    """One repeat's figures from its acceptance_rate and timing objects and its
    successful AIPerf records (for TPOT), with its failed and successful request counts (the
    validity rule holds for every repeat: launcher.results.validity.repeat_problems)."""
    tpot = []
    for r in records:
        n = getattr(r, "output_tokens", None)  # the server's count, not AIPerf's re-tokenized text
        lat, ttft = getattr(r, "latency_ms", None), getattr(r, "ttft_ms", None)
        if n is not None and n >= 2 and lat is not None and ttft is not None and lat > ttft:
            tpot.append((lat - ttft) / 1e3 / (n - 1))
    al = acceptance.get("Average_AL") if acceptance else None
    ext = (timing_doc or {}).get(EXTENSION_KEY) or {}
    return {
        "Output TPS": timing_doc.get("Output TPS"),
        "TTFT s": _median_stat(timing_doc, "TTFT Time"),
        "TPOT s": median(tpot) if tpot else None,
        "E2E s": _median_stat(timing_doc, "E2E Request Time"),
        "Decode tok/s": _median_stat(timing_doc, "Request Generation Tokens Per Second"),
        "Average_AL": float(al) if isinstance(al, (int, float)) else None,
        "failed_requests": ext.get("failed_requests") if isinstance(ext.get("failed_requests"), int) else None,
        "succeeded_requests": ext.get("num_turns") if isinstance(ext.get("num_turns"), int) else None,
    }


def held_repeat(per_repeat: Sequence[dict]) -> int:
    """Index (0-based) of the repeat specdec_bench's files hold: the median Output TPS."""
    tps = [(r.get("Output TPS"), i) for i, r in enumerate(per_repeat) if r.get("Output TPS") is not None]
    if not tps:
        return 0
    ordered = sorted(tps, key=lambda x: (x[0], x[1]))
    return ordered[(len(ordered) - 1) // 2][1]


def build(per_repeat: Sequence[dict], held: int, noisy_rel_mad: float = NOISY_REL_MAD) -> dict:
    """repeats.json's object. ``per_repeat``: {"repeat": i, "phase": ..., <figures>} in run order."""
    stats = {}
    for key in FIGURES:
        s = summarize([r.get(key) for r in per_repeat], noisy_rel_mad)
        stats[key] = s.to_dict() if s else None
    noise = stats.get(NOISE_FIGURE) or {}
    return {"schema_version": SCHEMA_VERSION, "repeats": len(per_repeat),
            "files_hold": {"repeat": per_repeat[held]["repeat"] if per_repeat else None, "rule": HOLD_RULE},
            "noisy_rel_mad": noisy_rel_mad, "noisy": bool(noise.get("noisy")),
            "noise_figure": NOISE_FIGURE, "per_repeat": list(per_repeat), "stats": stats,
            "figures": dict(FIGURES)}


def read(point_dir) -> Optional[dict]:
    """A point's repeats.json, or None."""
    try:
        d = json.loads((Path(point_dir) / REPEATS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and isinstance(d.get("stats"), dict) else None


def figure(doc: Optional[dict], key: str) -> Optional[Summary]:
    """One figure's summary from a repeats.json object."""
    s = ((doc or {}).get("stats") or {}).get(key)
    return Summary.from_dict(s) if isinstance(s, dict) else None


FAILED_OVER_REPEATS_WORDS = "failed F (n=N): the failed requests of all N repeats"


def failed_over_repeats(row: Optional[dict]) -> Optional[str]:
    """``F (n=N)``: every repeat's failed requests, from summary.json's ``repeats`` row
    (:func:`compact`); None without repeats or where the rows predate the count."""
    row = row or {}
    if (row.get("n") or 1) > 1 and row.get("failed_requests") is not None:
        return f"{row['failed_requests']} (n={row['n']})"
    return None


def compact(doc: Optional[dict]) -> Optional[dict]:
    """The headline of repeats.json for summary.json's point row."""
    if not doc:
        return None
    tps = ((doc.get("stats") or {}).get(NOISE_FIGURE)) or {}
    failed = [r["failed_requests"] for r in doc.get("per_repeat") or [] if isinstance(r.get("failed_requests"), int)]
    return {"n": doc.get("repeats"), "noisy": doc.get("noisy"), "files_hold": (doc.get("files_hold") or {}).get("repeat"),
            "Output TPS mean": tps.get("mean"), "Output TPS lo": tps.get("lo"), "Output TPS hi": tps.get("hi"),
            "Output TPS rel_mad": tps.get("rel_mad"),
            # every repeat's failed requests (None where the rows predate the count)
            "failed_requests": sum(failed) if failed else None}
