"""common/setup/make_shaped_models.py: the 8B-shaped target and 1B-shaped draft of
recipe=gpu_8b, built at the small shape on the CPU (the vllm venv has torch), loaded back
with transformers; the full shape's parameter counts against the published models'."""
from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.stack import VLLM_PYTHON

REPO = Path(__file__).resolve().parents[2]
BUILDER = REPO / "common" / "setup" / "make_shaped_models.py"


def _module():
    spec = importlib.util.spec_from_file_location("make_shaped_models", BUILDER)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_shaped_models"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_full_shapes_have_the_published_parameter_counts():
    m = _module()
    count = lambda s: sum(math.prod(shape) for _, shape in m.tensor_shapes(s))  # noqa: E731
    # Llama-3.1-8B: 8,030,261,248 parameters; Llama-3.2-1B (tied embeddings): 1,235,814,400
    assert count(m.SHAPES["full"]["target"]) == 8_030_261_248
    assert count(m.SHAPES["full"]["draft"]) == 1_235_814_400
    t = m.SHAPES["full"]["target"]
    assert (t.hidden, t.layers, t.heads, t.kv_heads, t.head_dim, t.intermediate, t.vocab) == \
        (4096, 32, 32, 8, 128, 14336, 128256)
    shards = m.shard_plan(t)
    assert len(shards) == 4 and all(sum(2 * math.prod(s) for _, s in sh) <= m.SHARD_BYTES for sh in shards)
    assert [n for sh in shards for n, _ in sh] == [n for n, _ in m.tensor_shapes(t)]


def test_special_tokens_sit_at_the_top_of_the_vocabulary():
    m = _module()
    sp = dict(m.special_tokens(128256))
    assert sp[128000] == "<|begin_of_text|>" and sp[128009] == "<|eot_id|>"
    assert sp[128255] == "<|reserved_special_token_255|>" and min(sp) == 128000 and len(sp) == 256


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} missing: run common/setup/install.sh"
    out = tmp_path_factory.mktemp("shaped")
    r = subprocess.run([str(VLLM_PYTHON), str(BUILDER), str(out), "--shape", "small", "--report",
                        str(out / "report.json")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out, r


def test_small_build_loads_with_transformers(built):
    out, _ = built
    probe = textwrap.dedent(f"""
        import json, sys
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
        res = {{}}
        for role in ("target", "draft"):
            d = "{out}/" + role
            cfg = AutoConfig.from_pretrained(d)
            tok = AutoTokenizer.from_pretrained(d)
            model = AutoModelForCausalLM.from_pretrained(d, dtype="auto")
            ids = tok.apply_chat_template([{{"role": "user", "content": "What is 2 + 2?"}}],
                                          add_generation_prompt=True, tokenize=True, return_dict=False)
            text = tok.apply_chat_template([{{"role": "user", "content": "What is 2 + 2?"}}],
                                           add_generation_prompt=True, tokenize=False)
            w = model.get_input_embeddings().weight
            res[role] = {{"arch": cfg.architectures, "model_type": cfg.model_type, "vocab": cfg.vocab_size,
                         "hidden": cfg.hidden_size, "layers": cfg.num_hidden_layers,
                         "heads": cfg.num_attention_heads, "kv": cfg.num_key_value_heads,
                         "head_dim": cfg.head_dim, "tie": cfg.tie_word_embeddings,
                         "rope_theta": (getattr(cfg, "rope_parameters", None) or {{}}).get("rope_theta")
                                       or getattr(cfg, "rope_theta", None),
                         "len_tok": len(tok), "top": tok.convert_ids_to_tokens(cfg.vocab_size - 1),
                         "bos": tok.bos_token_id, "eos": tok.eos_token_id, "text": text,
                         "n_ids": len(ids), "dtype": str(w.dtype), "std": float(w.float().std()),
                         "params": sum(p.numel() for p in model.parameters()),
                         "decodes_all": all(isinstance(t, str) for t in tok.convert_ids_to_tokens(list(range(cfg.vocab_size))))}}
        print(json.dumps(res))
    """)
    r = subprocess.run([str(VLLM_PYTHON), "-c", probe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    t, d = res["target"], res["draft"]
    assert t["arch"] == ["LlamaForCausalLM"] and t["model_type"] == "llama"
    assert (t["hidden"], t["layers"], t["heads"], t["kv"], t["head_dim"], t["vocab"]) == (256, 2, 4, 2, 64, 4096)
    assert t["tie"] is False and d["tie"] is True and t["rope_theta"] == 500000.0
    for m in (t, d):
        assert m["len_tok"] == m["vocab"] == 4096  # ids map 1:1 onto the vocabulary
        assert m["decodes_all"] and m["top"] == "<|reserved_special_token_255|>"
        assert m["bos"] == 4096 - 256 and m["eos"] == 4096 - 256 + 9
        assert m["text"].startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>")
        assert m["text"].endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
        assert m["dtype"] == "torch.bfloat16" and 0.015 < m["std"] < 0.025
    assert 3 < t["n_ids"] < len(t["text"])  # the BPE merges text: fewer ids than characters
    assert t["params"] == sum(math.prod(s) for _, s in _module().tensor_shapes(_module().SHAPES["small"]["target"]))
    idx = json.loads((Path(built[0]) / "target" / "model.safetensors.index.json").read_text())
    assert set(idx["weight_map"].values()) == {"model-00001-of-00001.safetensors"}
    assert idx["metadata"]["total_size"] == _module().num_bytes(_module().SHAPES["small"]["target"])


def test_a_second_run_keeps_what_is_built(built):
    out, _ = built
    before = (out / "target" / "model-00001-of-00001.safetensors").stat().st_mtime_ns
    r = subprocess.run([str(VLLM_PYTHON), str(BUILDER), str(out), "--shape", "small"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.count("already built") == 2, r.stdout + r.stderr
    assert (out / "target" / "model-00001-of-00001.safetensors").stat().st_mtime_ns == before


def test_an_unknown_role_is_a_one_line_error(tmp_path):
    r = subprocess.run([sys.executable, str(BUILDER), str(tmp_path), "--only", "medusa"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--only" in r.stderr


def test_eagle3_head_has_the_layout_vllm_026_loads(tmp_path):
    """vLLM 0.26's Eagle3LlamaForCausalLM (llama_eagle3.py): midlayer with 2 x hidden q/k/v
    inputs, fc over 3 hidden states, lm_head over draft_vocab_size, d2t; no embed_tokens."""
    m = _module()
    full = {n: s for n, s, _ in m.eagle3_tensor_shapes(m.SHAPES["full"]["target"], 32000)}
    assert full["midlayer.self_attn.q_proj.weight"] == (4096, 8192) and full["fc.weight"] == (4096, 12288)
    assert full["lm_head.weight"] == (32000, 4096) and full["d2t"] == (32000,) and "embed_tokens.weight" not in full
    r = subprocess.run([str(VLLM_PYTHON), str(BUILDER), str(tmp_path), "--shape", "small", "--only", "eagle3"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    probe = textwrap.dedent(f"""
        import json
        from safetensors import safe_open
        with safe_open("{tmp_path}/eagle3/model.safetensors", "pt") as f:
            print(json.dumps({{k: [list(f.get_tensor(k).shape), str(f.get_tensor(k).dtype)] for k in f.keys()}}))
    """)
    p = subprocess.run([str(VLLM_PYTHON), "-c", probe], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    small = m.SHAPES["small"]["target"]
    assert got == {n: [list(s), "torch.int64" if kind == "int64" else "torch.bfloat16"]
                   for n, s, kind in m.eagle3_tensor_shapes(small, m.EAGLE3_DRAFT_VOCAB["small"])}
    cfg = json.loads((tmp_path / "eagle3" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["num_hidden_layers"] == 1
    assert cfg["draft_vocab_size"] == 1024 and cfg["vocab_size"] == 4096 and cfg["hidden_size"] == small.hidden
