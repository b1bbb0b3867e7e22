"""common/setup/make_shaped_models.py: the Llama-3.1-8B-shaped target, 1B-shaped draft and
EAGLE3 head (recipe=gpu_8b, llama31_eagle3), the Qwen3-8B-shaped target, DFlash draft and
EAGLE3 head (qwen3_dflash, qwen3_eagle3), built at the small shape on the CPU (the vllm venv
has torch) and read back: every tensor against LAYOUTS (vLLM 0.26's names and shapes), the
config fields vLLM reads; the full shapes' parameter counts against the published models'."""
from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.shaped import BUILDER, build_small
from tests.support.stack import VLLM_PYTHON


def _module():
    spec = importlib.util.spec_from_file_location("make_shaped_models", BUILDER)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_shaped_models"] = mod
    spec.loader.exec_module(mod)
    return mod


def _count(m, model: str, role: str) -> int:
    s, head = m.role_specs("full", model, role)
    return sum(math.prod(shape) for _, shape, _ in m.tensor_shapes(s, head))


def test_full_shapes_have_the_published_parameter_counts():
    m = _module()
    # Llama-3.1-8B: 8,030,261,248 parameters; Llama-3.2-1B (tied embeddings): 1,235,814,400
    assert _count(m, "llama8b", "target") == 8_030_261_248
    assert _count(m, "llama8b", "draft") == 1_235_814_400
    # Qwen3-8B: "8.2B, 6.95B non-embedding" (its model card): 2 x 151936 x 4096 embedding + lm_head
    q = _count(m, "qwen3_8b", "target")
    assert q == 8_190_735_360 and round((q - 2 * 151936 * 4096) / 1e9, 2) == 6.95
    t = m.SHAPES["full"]["llama8b"]["target"]
    assert (t.hidden, t.layers, t.heads, t.kv_heads, t.head_dim, t.intermediate, t.vocab) == \
        (4096, 32, 32, 8, 128, 14336, 128256)
    q3 = m.SHAPES["full"]["qwen3_8b"]["target"]
    assert (q3.hidden, q3.layers, q3.heads, q3.kv_heads, q3.head_dim, q3.intermediate, q3.vocab, q3.family,
            q3.rope_theta, q3.max_positions, q3.tie_embeddings, q3.rope_factor) == \
        (4096, 36, 32, 8, 128, 12288, 151936, "qwen3", 1e6, 40960, False, None)
    for s in (t, q3):
        shards = m.shard_plan(s)
        assert len(shards) == 4 and all(sum(2 * math.prod(x) for _, x, _ in sh) <= m.SHARD_BYTES for sh in shards)
        assert [n for sh in shards for n, _, _ in sh] == [n for n, _, _ in m.tensor_shapes(s)]


@pytest.mark.parametrize("shape", ["full", "small"])
def test_eagle3_targets_have_three_distinct_aux_layers(shape):
    """An EAGLE3 head without eagle_aux_hidden_state_layer_ids reads vLLM's default layers of
    the target: three distinct ones, inside the target, or fc's input is short."""
    m = _module()
    for model, roles in m.SHAPES[shape].items():
        if "eagle3" in roles:
            layers = roles["target"].layers
            aux = m.eagle3_aux_layers(layers)
            assert len(set(aux)) == 3 and all(0 <= i < layers for i in aux), (model, aux)
        if "dflash" in roles:
            ids = roles["dflash"].target_layer_ids
            assert len(set(ids)) == len(ids) and max(ids) < roles["target"].layers


def test_full_heads_have_the_checkpoints_shapes():
    """DFlash as z-lab/Qwen3-8B-DFlash-b16 (5 Qwen3 layers at 4096, fc over 5 target layers, no
    embed_tokens / lm_head: vLLM shares the target's); EAGLE3 heads with q/k/v over 2 x hidden,
    fc over 3 hidden states, a 32000-row lm_head and d2t (qk-norm in the Qwen3 head only)."""
    m = _module()
    d = m.SHAPES["full"]["qwen3_8b"]["dflash"]
    assert (d.layers, d.block_size, d.target_layer_ids, d.mask_token_id) == (5, 16, (1, 9, 17, 25, 33), 151669)
    dfl = {n: s for n, s, _ in m.tensor_shapes(*m.role_specs("full", "qwen3_8b", "dflash"))}
    assert dfl["fc.weight"] == (4096, 5 * 4096) and dfl["layers.4.self_attn.k_norm.weight"] == (128,)
    assert dfl["layers.0.self_attn.q_proj.weight"] == (4096, 4096) and "layers.5.mlp.up_proj.weight" not in dfl
    assert not [n for n in dfl if "embed_tokens" in n or "lm_head" in n or n == "d2t"]
    assert _count(m, "qwen3_8b", "dflash") == 1_048_626_432
    for model, count, qk in (("llama8b", 424_721_664, False), ("qwen3_8b", 399_556_096, True)):
        e3 = {n: s for n, s, _ in m.tensor_shapes(*m.role_specs("full", model, "eagle3"))}
        assert e3["midlayer.self_attn.q_proj.weight"] == (4096, 8192) and e3["fc.weight"] == (4096, 12288)
        assert e3["lm_head.weight"] == (32000, 4096) and e3["d2t"] == (32000,) and "embed_tokens.weight" not in e3
        assert ("midlayer.self_attn.q_norm.weight" in e3) is qk and _count(m, model, "eagle3") == count


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
    assert (t["hidden"], t["layers"], t["heads"], t["kv"], t["head_dim"], t["vocab"]) == (256, 8, 4, 2, 64, 4096)
    assert t["tie"] is False and d["tie"] is True and t["rope_theta"] == 500000.0
    for m in (t, d):
        assert m["len_tok"] == m["vocab"] == 4096  # ids map 1:1 onto the vocabulary
        assert m["decodes_all"] and m["top"] == "<|reserved_special_token_255|>"
        assert m["bos"] == 4096 - 256 and m["eos"] == 4096 - 256 + 9
        assert m["text"].startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>")
        assert m["text"].endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
        assert m["dtype"] == "torch.bfloat16" and 0.015 < m["std"] < 0.025
    assert 3 < t["n_ids"] < len(t["text"])  # the BPE merges text: fewer ids than characters
    small = _module().SHAPES["small"]["llama8b"]["target"]
    assert t["params"] == sum(math.prod(s) for _, s, _ in _module().tensor_shapes(small))
    idx = json.loads((Path(built[0]) / "target" / "model.safetensors.index.json").read_text())
    assert set(idx["weight_map"].values()) == {"model-00001-of-00001.safetensors"}
    assert idx["metadata"]["total_size"] == _module().num_bytes(small)


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
    r = subprocess.run([sys.executable, str(BUILDER), str(tmp_path), "--model", "llama8b", "--only", "dflash"],
                       capture_output=True, text=True, timeout=60)  # a DFlash draft is Qwen3's here
    assert r.returncode == 2 and "'dflash' for --model llama8b" in r.stderr and "target, draft, eagle3" in r.stderr


ROLES = (("llama8b", "target"), ("llama8b", "draft"), ("llama8b", "eagle3"),
         ("qwen3_8b", "target"), ("qwen3_8b", "dflash"), ("qwen3_8b", "eagle3"))


@pytest.fixture(scope="module")
def built_all(tmp_path_factory):
    """Every role of both families at the small shape, and what its files hold (tensor name ->
    [shape, dtype], read through model.safetensors.index.json), in one probe."""
    out = build_small(tmp_path_factory.mktemp("shaped_all"), (("llama8b", "eagle3"), ("qwen3_8b", "target,dflash,eagle3")))
    probe = textwrap.dedent(f"""
        import json, pathlib
        from safetensors import safe_open
        res = {{}}
        for d in sorted(pathlib.Path("{out}").glob("*/*")):
            idx = json.loads((d / "model.safetensors.index.json").read_text())["weight_map"]
            got = {{}}
            for f in sorted(set(idx.values())):
                with safe_open(str(d / f), "pt") as st:
                    got.update({{k: [list(st.get_tensor(k).shape), str(st.get_tensor(k).dtype)] for k in st.keys()}})
            res[d.parent.name + "/" + d.name] = {{"tensors": got, "index": sorted(idx)}}
        print(json.dumps(res))
    """)
    p = subprocess.run([str(VLLM_PYTHON), "-c", probe], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return out, json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model,role", [r for r in ROLES if r != ("llama8b", "target") and r != ("llama8b", "draft")])
def test_small_heads_and_qwen3_have_vllms_layout(built_all, model, role):
    """The files hold exactly LAYOUTS' tensors (vLLM 0.26's names, shapes, dtypes) and the
    config every field vLLM reads, with the values the shape table gives."""
    m = _module()
    out, res = built_all
    got = res[f"{model}/{role}"]
    s, head = m.role_specs("small", model, role)
    want = {n: [list(x), "torch.int64" if dt == "int64" else "torch.bfloat16"] for n, x, dt in m.tensor_shapes(s, head)}
    assert got["tensors"] == want and got["index"] == sorted(want)
    cfg = json.loads((out / model / role / "config.json").read_text())
    kind = head.kind if head else "causal"
    for key in m.CONFIG_READS[kind]:
        top, _, sub = key.partition(".")
        assert top in cfg and (not sub or sub in cfg[top]), f"{model}/{role} config.json lacks {key}"
    assert cfg["architectures"] == [m.ARCHITECTURES[(kind, s.family)]]
    assert cfg["hidden_size"] == s.hidden and cfg["vocab_size"] == s.vocab and cfg["head_dim"] == s.head_dim
    assert cfg["num_hidden_layers"] == (head.layers if head else s.layers)
    if kind == "dflash":
        assert cfg["dflash_config"] == {"mask_token_id": head.mask_token_id, "target_layer_ids": [1, 3]}
        assert cfg["block_size"] == 16 and cfg["num_target_layers"] == s.layers and cfg["model_type"] == "qwen3"
        assert max(head.target_layer_ids) < s.layers and head.mask_token_id < s.vocab
    if kind == "eagle3":
        assert cfg["draft_vocab_size"] == 1024 < cfg["vocab_size"]
    if model == "qwen3_8b":
        assert cfg["model_type"] == "qwen3" and cfg["rms_norm_eps"] == 1e-6
        assert cfg["rope_parameters"]["rope_theta"] == 1e6 and "rope_scaling" not in cfg or not cfg.get("rope_scaling")
        assert any(n.endswith("self_attn.q_norm.weight") for n in want)


def test_one_tokenizer_per_family_covers_the_vocabulary(built_all):
    """Target and heads of a family carry the same tokenizer (one vocabulary: the heads share
    the target's embedding and, for DFlash, its lm_head)."""
    out, _ = built_all
    toks = {r: (out / "qwen3_8b" / r / "tokenizer.json").read_bytes() for r in ("target", "dflash", "eagle3")}
    assert len(set(toks.values())) == 1
    marker = json.loads((out / "qwen3_8b" / "dflash" / ".shaped.json").read_text())
    assert marker["model"] == "qwen3_8b" and marker["role"] == "dflash" and marker["kind"] == "dflash"
