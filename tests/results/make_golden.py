"""Rebuild the golden fixtures in tests/results/golden/ by running NVIDIA
Model-Optimizer's own specdec_bench code on the engine traces of
tests/results/golden_input.json:

    python tests/results/make_golden.py MODELOPT_DIR [OUT_DIR]

MODELOPT_DIR is a checkout of github.com/NVIDIA/Model-Optimizer; its commit is
recorded in OUT_DIR/SOURCE.json. Run it with a Python that has numpy (the
vLLM venv has it); the plotting libraries SpecBench imports are replaced by
stand-ins when absent (its plots are not part of the fixtures).

Per case, each engine trace goes through specdec_bench's vLLM wrapper
(``VLLMModel.run``, with its engine call replaced by the trace), then its
metric class (MTBench / SpecBench / AcceptanceRate) and Timing. The folder
holds exactly the files specdec_bench writes. No specdec_bench code is kept
in this repository: only what it produced.
"""
from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent


def engine_trace(turn: dict, eos_id: int) -> tuple[list[int], list[float], list[int]]:
    """(cumulative token counts after each engine output, times, token ids)."""
    n = turn["completion_tokens"]
    cum, c = [], 0
    for grow in [1] + [1 + a for a in turn["per_step_accepted"]]:
        if c >= n:
            break
        c = min(c + grow, n)
        cum.append(c)
    tokens = [10 + i for i in range(n)]
    if turn["eos"] and n:
        tokens[-1] = eos_id
    times = list(turn["times"])
    if len(times) != len(cum) + 1:
        raise SystemExit(f"golden_input.json: a turn has {len(times)} times for {len(cum)} engine outputs "
                         f"(needs start + one per output): {turn}")
    return cum, times, tokens


def _stub_plotting() -> None:
    for name in ("pandas", "matplotlib", "matplotlib.pyplot"):
        try:
            __import__(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
            sys.modules[name] = stub
    if not hasattr(sys.modules["matplotlib"], "pyplot"):
        sys.modules["matplotlib"].pyplot = sys.modules["matplotlib.pyplot"]


def _load(modelopt: Path):
    root = modelopt / "examples" / "specdec_bench"
    sys.path.insert(0, str(root))
    # The vLLM wrapper first (it imports vllm, which must see the real
    # libraries), loaded alone (the models package imports every engine).
    pkg = types.ModuleType("sdb_models_pkg")
    pkg.__path__ = [str(root / "specdec_bench/models")]
    sys.modules["sdb_models_pkg"] = pkg
    spec = importlib.util.spec_from_file_location("sdb_models_pkg.vllm", root / "specdec_bench/models/vllm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _stub_plotting()
    from specdec_bench import metrics
    from specdec_bench.datasets import speed
    return metrics, mod.VLLMModel, speed.SPEEDBench


class _FakeEngine:
    def __init__(self, trace):
        self.trace = trace
        self.sampling_config = types.SimpleNamespace()
        self.sampling_kwargs = {}

    async def generate(self, prompt_ids, request_id, turn_id):
        return self.trace


class _Rows:
    """The slice of a Hugging Face Dataset that _stratified_select touches."""

    def __init__(self, categories):
        self.column_names = ["category"]
        self.cats = categories

    def __getitem__(self, key):
        return self.cats

    def select(self, idx):
        return list(idx)


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    modelopt = Path(argv[0]).resolve()
    out = Path(argv[1]) if len(argv) == 2 else HERE / "golden"
    if not (modelopt / "examples/specdec_bench/specdec_bench/metrics").is_dir():
        print(f"{modelopt}: not a Model-Optimizer checkout (no examples/specdec_bench); clone "
              "https://github.com/NVIDIA/Model-Optimizer and pass its folder", file=sys.stderr)
        return 2
    commit = subprocess.run(["git", "-C", str(modelopt), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    metrics, VLLMModel, SPEEDBench = _load(modelopt)
    spec = json.loads((HERE / "golden_input.json").read_text())
    eos = spec["eos_id"]
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for case, c in spec["cases"].items():
        d = out / case
        d.mkdir()
        reqs = c["requests"]
        if case == "mtbench":
            acc = metrics.MTBench()
        elif case == "specbench":
            rows = [types.SimpleNamespace(question_id=r["question_id"], category=r["category"],
                                          turns=[f"q{i}" for i in range(len(r["turns"]))]) for r in reqs]
            acc = metrics.SpecBench(requests=rows)
            acc._create_visualizations = lambda *a, **k: None
        else:
            acc = metrics.AcceptanceRate()
        timing = metrics.Timing(spec["tp_size"])
        for m in (acc, timing):
            m.directory = str(d)  # an instance attribute: each case its own folder
        texts = []
        for i, r in enumerate(reqs):
            msgs = []
            for t, turn in enumerate(r["turns"]):
                eng = _FakeEngine(engine_trace(turn, eos))
                step = asyncio.run(VLLMModel.run(eng, [1, 2, 3], 4096, eos, i, t))
                for m in (acc, timing):
                    m.process_step(step, i, t)
                msgs += [{"role": "user", "content": f"q{i}.{t}"}, {"role": "assistant", "content": f"a{i}.{t}"}]
            texts.append(msgs)
        for m in (acc, timing):
            m.process_final(texts)
        # SpecBench's specbench_results.json is kept (a fixture); its plot is not drawn.
    sub = spec["speed_subsample"]
    picks = {str(n): SPEEDBench._stratified_select(_Rows(sub["categories"]), n) for n in sub["n"]}
    (out / "speed_subsample.json").write_text(json.dumps(picks, indent=1) + "\n")
    (out / "SOURCE.json").write_text(json.dumps({
        "repository": "https://github.com/NVIDIA/Model-Optimizer", "commit": commit,
        "made_by": "tests/results/make_golden.py", "input": "tests/results/golden_input.json",
        "classes": ["models.vllm.VLLMModel.run", "metrics.MTBench", "metrics.SpecBench",
                    "metrics.AcceptanceRate", "metrics.Timing", "datasets.speed.SPEEDBench._stratified_select"],
    }, indent=1) + "\n")
    print(f"golden fixtures from Model-Optimizer {commit[:10]} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
