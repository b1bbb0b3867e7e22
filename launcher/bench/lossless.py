"""Lossless check: at temperature 0 speculative decoding must not change the output.

The same prompts go to the speculative server and to a reference server without
speculation; at least `required_matches(n, fraction)` outputs must match exactly.
Run in two steps so only one server needs to be up at a time:

  python -m launcher.bench.lossless collect --url SPEC_URL --model M --out spec.json PROMPT SOURCES...
  python -m launcher.bench.lossless compare --url REF_URL  --model M --spec spec.json --save_dir DIR
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Optional

from launcher.bench.preflight import chat
from launcher.contracts.job import LosslessSpec
from launcher.results.summary import update_summary


def spec_outputs_path(save_dir: str | Path) -> Path:
    """The speculative server's outputs in a job folder, which the reference server's are compared with."""
    return Path(save_dir) / "lossless" / "spec_outputs.json"


def required_matches(n: int, fraction: float) -> int:
    """By default 60% of the prompts plus one (capped at n)."""
    return min(n, math.floor(fraction * n) + 1)


def _trunc(s, n: int = 120):
    if isinstance(s, list):
        return s[:24] + (["..."] if len(s) > 24 else [])
    return s if len(s) <= n else s[:n] + "..."


def compare_outputs(prompts: list[str], spec: list[dict], ref: list[dict], fraction: float) -> dict:
    """Pure: {"passed", "matches", "required", "prompts", "mismatches": first 3}."""
    if not (len(prompts) == len(spec) == len(ref)):
        raise ValueError(f"lossless: {len(prompts)} prompts but {len(spec)} speculative and {len(ref)} reference outputs")
    mismatches, matches = [], 0
    for p, s, r in zip(prompts, spec, ref):
        if s["text"] == r["text"]:
            matches += 1
        else:
            ids_s, ids_r = s.get("token_ids") or [], r.get("token_ids") or []
            first = next((i for i, (a, b) in enumerate(zip(ids_s, ids_r)) if a != b), min(len(ids_s), len(ids_r)))
            mismatches.append({"prompt": _trunc(p), "spec_text": _trunc(s["text"]), "ref_text": _trunc(r["text"]),
                               "spec_token_ids": _trunc(ids_s), "ref_token_ids": _trunc(ids_r),
                               "first_diff_token": first})
    need = required_matches(len(prompts), fraction)
    return {"passed": matches >= need, "matches": matches, "required": need, "prompts": len(prompts),
            "min_match_fraction": fraction, "mismatches": mismatches[:3], "num_mismatches": len(mismatches)}


def generate(url: str, model: str, prompts: list[str], max_tokens: int) -> list[dict]:
    out = []
    for p in prompts:
        r = chat(url, model, p, max_tokens, {"temperature": 0.0, "top_p": 1.0, "top_k": -1,
                                             "return_token_ids": True, "skip_special_tokens": False})
        ch = r["choices"][0]
        out.append({"text": ch["message"].get("content") or "", "token_ids": ch.get("token_ids")})
    return out


def format_result(res: dict) -> str:
    head = (f"lossless check {'PASSED' if res['passed'] else 'FAILED'}: {res['matches']}/{res['prompts']} outputs "
            f"match exactly (required {res['required']})")
    lines = [head]
    for i, m in enumerate(res["mismatches"], 1):
        lines.append(f"  mismatch {i}: prompt {m['prompt']!r}, first differing token #{m['first_diff_token']}")
        lines.append(f"    speculative: {m['spec_text']!r} ids={m['spec_token_ids']}")
        lines.append(f"    reference:   {m['ref_text']!r} ids={m['ref_token_ids']}")
    return "\n".join(lines)


def prompts_from_datasets(datasets: dict, n: int) -> list[str]:
    """The first turn of the first questions, round-robin over the datasets."""
    lists = [[q.turns[0] for q in qs] for _, qs in datasets.values()]
    out: list[str] = []
    i = 0
    while len(out) < n and any(i < len(lst) for lst in lists):
        for lst in lists:
            if i < len(lst) and len(out) < n:
                out.append(lst[i])
        i += 1
    return out


def collect_spec_outputs(url: str, model: str, prompts: list[str], max_tokens: int, out: Path,
                         fraction: float) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"prompts": prompts, "max_tokens": max_tokens, "min_match_fraction": fraction,
                               "outputs": generate(url, model, prompts, max_tokens)}, indent=1))


def run_lossless(base_url: str, model: str, check: LosslessSpec, datasets: dict, save_dir: Path) -> Optional[dict]:
    """Called by the benchmark after its sweep: collect the speculative outputs. The
    comparison runs once a reference server is up (the node job starts it)."""
    prompts = prompts_from_datasets(datasets, check.num_prompts)
    collect_spec_outputs(base_url, model, prompts, check.output_length,
                         spec_outputs_path(save_dir), check.min_match_fraction)
    return {"status": "pending reference run", "prompts": len(prompts)}


def compare_with_reference(url: str, model: str, spec_file: Path, save_dir: Path) -> dict:
    spec = json.loads(spec_file.read_text())
    ref = generate(url, model, spec["prompts"], spec["max_tokens"])
    res = compare_outputs(spec["prompts"], spec["outputs"], ref, spec["min_match_fraction"])
    (save_dir / "lossless").mkdir(parents=True, exist_ok=True)
    (save_dir / "lossless" / "result.json").write_text(json.dumps(res, indent=1))
    update_summary(save_dir, lossless=res)
    return res


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m launcher.bench.lossless")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="speculative outputs for the prompts")
    c.add_argument("--url", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--max_tokens", type=int, default=64)
    c.add_argument("--min_match_fraction", type=float, default=0.6)
    c.add_argument("--prompts_file", required=True, help="a JSON list of prompts")
    r = sub.add_parser("compare", help="reference outputs, compared with the speculative ones")
    r.add_argument("--url", required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--spec", required=True)
    r.add_argument("--save_dir", required=True)
    a = p.parse_args(argv)
    if a.cmd == "collect":
        prompts = json.loads(Path(a.prompts_file).read_text())
        collect_spec_outputs(a.url.rstrip("/"), a.model, prompts, a.max_tokens, Path(a.out), a.min_match_fraction)
        return 0
    res = compare_with_reference(a.url.rstrip("/"), a.model, Path(a.spec), Path(a.save_dir))
    print(format_result(res))
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
