"""The speedup that the measured acceptance predicts, beside the measured one.

The model is the standard one of speculative decoding (Leviathan, Kalman and
Matias, "Fast Inference from Transformers via Speculative Decoding", ICML
2023): a step drafts k tokens at a cost of c target steps each, then one
target pass verifies them and emits E tokens on average, so the wall-time
improvement over plain decoding is

    E / (k c + 1).

Leviathan et al. write E = (1 - a^(k+1)) / (1 - a) for an i.i.d. acceptance
rate a; here E comes from the measured per-position acceptance instead
(vLLM's per-request acceptance histogram), so no i.i.d. assumption is made:

    E(k) = 1 + sum_{i=1..k} P(at least i drafts accepted in a step).

The cost c comes from measured step times: the baseline's latency per
engine step (one target step per token) and the speculative run's latency per
engine step (prefill, then one verify step per chunk), at the same (dataset,
temperature, concurrency). Whole-request latency is used rather than
latency - TTFT: AIPerf stamps the SSE events of one network read with one
time, so on short or fast answers the first chunk can carry most of the text
and the decode time collapses. With two or more k,
a least-squares line  spec_step / base_step = v + c k  separates the draft's
cost per drafted token (c) from the fixed cost of a verify step (v, in target
steps; the model assumes v = 1). With one k the split is not identifiable: c =
(spec_step / base_step - 1) / k, i.e. v = 1 is assumed and the prediction
then equals the measured per-step decode speedup by construction.

Pure functions; docs/speedup.md has the worked example the tests use.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Mapping, Optional

from launcher.speedup.per_request import RequestTiming


def merge_histograms(hists: Iterable[Optional[Mapping]]) -> dict[int, int]:
    """Sum vLLM acceptance histograms (accepted drafts j -> steps); keys as ints."""
    out: dict[int, int] = {}
    for h in hists:
        for j, n in (h or {}).items():
            out[int(j)] = out.get(int(j), 0) + int(n)
    return {j: n for j, n in sorted(out.items()) if n}


def position_acceptance(hist: Mapping[int, int], k: Optional[int] = None) -> list[float]:
    """P(at least i drafts accepted in a step) for i = 1..k (k: the largest j seen)."""
    steps = sum(hist.values())
    if steps == 0:
        return []
    top = max(hist) if k is None else k
    return [sum(n for j, n in hist.items() if j >= i) / steps for i in range(1, top + 1)]


def expected_tokens_per_step(hist: Mapping[int, int], k: Optional[int] = None) -> Optional[float]:
    """E(k) = 1 + sum of the per-position acceptance; None without steps.
    For the measured k this is 1 + accepted / steps (Server_AL)."""
    if sum(hist.values()) == 0:
        return None
    return 1.0 + sum(position_acceptance(hist, k))


def base_step_s(records: list[RequestTiming]) -> Optional[float]:
    """Baseline seconds per engine step (one target step): pooled end-to-end
    latency / output tokens (the prefill step that makes the first token counts
    as one step, each later token as one)."""
    use = [r for r in records if r.e2e_s and r.output_tokens]
    n = sum(r.output_tokens for r in use)
    return sum(r.e2e_s for r in use) / n if n else None


def spec_step_s(records: list[RequestTiming]) -> Optional[float]:
    """Speculative seconds per engine step: pooled end-to-end latency / (1 + verify
    steps) (the prefill step, then one verify step per later chunk)."""
    use = [r for r in records if r.e2e_s and r.spec_steps is not None]
    n = sum(1 + r.spec_steps for r in use)
    return sum(r.e2e_s for r in use) / n if n else None


@dataclass(frozen=True)
class DraftCost:
    c: float            # cost of drafting one token, in target steps
    v: float            # cost of the verify step, in target steps (model: 1)
    method: str         # "fit over k=[...]" or "one k (verify cost assumed 1)"

    def to_dict(self) -> dict:
        return asdict(self)


def draft_cost(step_ratio_by_k: Mapping[int, float]) -> Optional[DraftCost]:
    """c (and v) from spec_step / base_step measured at each k.

    Two or more k: least squares r = v + c k. One k: c = (r - 1) / k, v = 1."""
    pts = sorted((int(k), float(r)) for k, r in step_ratio_by_k.items() if k and r is not None)
    if not pts:
        return None
    if len(pts) == 1:
        k, r = pts[0]
        return DraftCost(c=(r - 1.0) / k, v=1.0, method=f"one k={k} (verify cost assumed 1 target step)")
    n = len(pts)
    mk = sum(k for k, _ in pts) / n
    mr = sum(r for _, r in pts) / n
    sxx = sum((k - mk) ** 2 for k, _ in pts)
    c = sum((k - mk) * (r - mr) for k, r in pts) / sxx
    return DraftCost(c=c, v=mr - c * mk, method="fit over k=[" + ",".join(str(k) for k, _ in pts) + "]")


def unresolved_cost(cost: Optional[DraftCost]) -> Optional[str]:
    """Why ``cost`` predicts nothing, or None when it can: a negative draft cost (a drafted token
    cannot save time) says the step times moved between the runs by more than the draft costs,
    on a loaded or noisy machine, so they do not resolve it."""
    if cost is None or cost.c >= 0:
        return None
    return (f"the step times give a negative draft cost (c = {cost.c:.2f} target steps, {cost.method}): "
            f"they moved between the runs by more than the draft costs")


def predicted_speedup(expected_tokens: Optional[float], k: int, c: Optional[float]) -> Optional[float]:
    """Leviathan et al. (2023): E / (k c + 1); None when undefined: no cost, or a negative one
    (``unresolved_cost``), which would predict more than the E tokens a step yields."""
    if expected_tokens is None or c is None or k is None or c < 0:
        return None
    return expected_tokens / (k * c + 1.0)


def measured_step_speedup(expected_tokens: Optional[float], step_ratio: Optional[float]) -> Optional[float]:
    """What the step times measure: E tokens per verify step that costs step_ratio target steps."""
    if expected_tokens is None or not step_ratio:
        return None
    return expected_tokens / step_ratio


def diagnose(predicted: Optional[float], measured: Optional[float], v: Optional[float] = None,
             unresolved: Optional[str] = None) -> str:
    """One phrase on why a point is (not) faster than its baseline:
    measured >= 1: faster; predicted < 1: the acceptance cannot pay for the
    draft's cost; predicted >= 1 > measured: overheads, not the draft.
    ``unresolved``: why there is no prediction (``unresolved_cost``)."""
    if measured is None:
        return "no measurement"
    if measured >= 1.0:
        return "faster than the baseline"
    if predicted is None:
        return "slower; no prediction" + (f": {unresolved}" if unresolved else "")
    if predicted < 1.0:
        return "slower: the draft costs more than its accepted tokens save"
    extra = f" (a verify step costs {v:.2f} target steps)" if v is not None and v > 1.0 else ""
    return "slower than predicted: overheads, not the draft" + extra
