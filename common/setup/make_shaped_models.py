"""Build a target with Llama-3.1-8B's shape and a draft with Llama-3.2-1B's shape,
random bf16 weights, on the machine that serves them (nothing this large travels).

    python3 common/setup/make_shaped_models.py OUT_DIR [--shape full|small] [--only target,draft]

Writes ``OUT_DIR/target`` and ``OUT_DIR/draft`` (and ``OUT_DIR/eagle3`` with ``--only ...,eagle3``): each a LlamaForCausalLM checkpoint
(config.json, generation_config.json, sharded ``model-0000i-of-0000n.safetensors`` with
``model.safetensors.index.json``) and the same tokenizer. With forced acceptance
(``draft.forced_acceptance``) the draft's quality does not matter, so what a served
step costs is what the real model's costs: the same matrices, the same KV cache.

- ``--shape full`` (default): target hidden 4096, 32 layers, 32 query / 8 KV heads of
  128, intermediate 14336, vocabulary 128256, rope_theta 500000 with Llama 3.1's rope
  scaling (131072 positions), untied lm_head: Llama-3.1-8B's config.json fields.
  Draft: hidden 2048, 16 layers, 32 / 8 heads of 64, intermediate 8192, tied
  embeddings (Llama-3.2-1B's). 16.06 GB + 2.47 GB of bf16.
- ``--shape small``: the same code at a shape a CPU builds in seconds (the CI test).

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
BUILDER_VERSION = 1

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
    rope_factor: float  # Llama 3 rope scaling factor (8 for 3.1-8B, 32 for 3.2-1B)
    max_positions: int = 131072


EAGLE3_DRAFT_VOCAB = {"full": 32000, "small": 1024}  # EAGLE3-LLaMA3.1-Instruct-8B's draft_vocab_size

SHAPES = {
    "full": {"target": Shape(4096, 32, 32, 8, 128, 14336, 128256, False, 8.0),
             "draft": Shape(2048, 16, 32, 8, 64, 8192, 128256, True, 32.0)},
    "small": {"target": Shape(256, 2, 4, 2, 64, 512, 4096, False, 8.0, 16384),
              "draft": Shape(128, 1, 2, 1, 64, 256, 4096, True, 32.0, 16384)},
}


def tensor_shapes(s: Shape) -> list[tuple[str, tuple[int, ...]]]:
    """LlamaForCausalLM's parameter names and shapes, in file order."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    out = [("model.embed_tokens.weight", (s.vocab, s.hidden))]
    for i in range(s.layers):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (s.hidden,)),
                (p + "self_attn.q_proj.weight", (q, s.hidden)),
                (p + "self_attn.k_proj.weight", (kv, s.hidden)),
                (p + "self_attn.v_proj.weight", (kv, s.hidden)),
                (p + "self_attn.o_proj.weight", (s.hidden, q)),
                (p + "post_attention_layernorm.weight", (s.hidden,)),
                (p + "mlp.gate_proj.weight", (s.intermediate, s.hidden)),
                (p + "mlp.up_proj.weight", (s.intermediate, s.hidden)),
                (p + "mlp.down_proj.weight", (s.hidden, s.intermediate))]
    out.append(("model.norm.weight", (s.hidden,)))
    if not s.tie_embeddings:
        out.append(("lm_head.weight", (s.vocab, s.hidden)))
    return out


def eagle3_tensor_shapes(s: Shape, draft_vocab: int) -> list[tuple[str, tuple[int, ...], str]]:
    """An EAGLE3 head for a target of shape ``s``, as vLLM 0.26's Eagle3LlamaForCausalLM
    loads it (vllm/model_executor/models/llama_eagle3.py): one decoder layer ``midlayer``
    whose q/k/v take the token embedding and the hidden state concatenated (2 x hidden),
    ``fc`` folding the target's three auxiliary hidden states (3 x hidden) to one, the
    final norm, an lm_head over ``draft_vocab`` tokens and ``d2t`` (draft id -> target id
    offset). No embed_tokens: vLLM shares the target's. (name, shape, dtype)."""
    h, q, kv = s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim
    m = "midlayer."
    return [(m + "input_layernorm.weight", (h,), "bf16"), (m + "hidden_norm.weight", (h,), "bf16"),
            (m + "self_attn.q_proj.weight", (q, 2 * h), "bf16"), (m + "self_attn.k_proj.weight", (kv, 2 * h), "bf16"),
            (m + "self_attn.v_proj.weight", (kv, 2 * h), "bf16"), (m + "self_attn.o_proj.weight", (h, q), "bf16"),
            (m + "post_attention_layernorm.weight", (h,), "bf16"),
            (m + "mlp.gate_proj.weight", (s.intermediate, h), "bf16"), (m + "mlp.up_proj.weight", (s.intermediate, h), "bf16"),
            (m + "mlp.down_proj.weight", (h, s.intermediate), "bf16"),
            ("fc.weight", (h, 3 * h), "bf16"), ("norm.weight", (h,), "bf16"),
            ("lm_head.weight", (draft_vocab, h), "bf16"), ("d2t", (draft_vocab,), "int64")]


def write_eagle3(s: Shape, draft_vocab: int, out: Path, seed: int, device: str) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig

    base = s.vocab - NUM_SPECIALS
    cfg = LlamaConfig(
        vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate, num_hidden_layers=1,
        num_attention_heads=s.heads, num_key_value_heads=s.kv_heads, head_dim=s.head_dim,
        max_position_embeddings=s.max_positions, rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=False,
        bos_token_id=base, eos_token_id=[base + i for i in EOS_OFFSETS], rope_theta=500000.0,
        initializer_range=INIT_STD, dtype="bfloat16", draft_vocab_size=draft_vocab)
    cfg.architectures = ["LlamaForCausalLMEagle3"]
    cfg.save_pretrained(out)
    gen = torch.Generator(device=device).manual_seed(seed)
    tensors, total = {}, 0
    t0 = time.time()
    for name, shape, kind in eagle3_tensor_shapes(s, draft_vocab):
        if kind == "int64":  # draft id i -> target id i + d2t[i]: the first draft_vocab target ids
            t = torch.zeros(shape, dtype=torch.int64)
        elif len(shape) == 1:
            t = torch.ones(shape, dtype=torch.bfloat16)
        else:
            t = torch.randn(shape, generator=gen, dtype=torch.bfloat16, device=device).mul_(INIT_STD).cpu()
        tensors[name] = t
        total += t.numel() * t.element_size()
    t_gen = time.time() - t0
    save_file(tensors, str(out / "model.safetensors"), {"format": "pt"})
    return {"bytes": total, "shards": 1, "generate_s": round(t_gen, 1)}


def num_bytes(s: Shape) -> int:
    return sum(2 * math.prod(shape) for _, shape in tensor_shapes(s))


def shard_plan(s: Shape, shard_bytes: int = SHARD_BYTES) -> list[list[tuple[str, tuple[int, ...]]]]:
    """Tensors grouped into shards of at most ``shard_bytes`` (a larger tensor alone)."""
    shards: list[list] = [[]]
    size = 0
    for name, shape in tensor_shapes(s):
        b = 2 * math.prod(shape)
        if shards[-1] and size + b > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, shape))
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

def write_config(s: Shape, out: Path) -> None:
    from transformers import GenerationConfig, LlamaConfig

    base = s.vocab - NUM_SPECIALS
    eos = [base + i for i in EOS_OFFSETS]
    cfg = LlamaConfig(
        vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate, num_hidden_layers=s.layers,
        num_attention_heads=s.heads, num_key_value_heads=s.kv_heads, head_dim=s.head_dim,
        max_position_embeddings=s.max_positions, rms_norm_eps=1e-5, hidden_act="silu",
        tie_word_embeddings=s.tie_embeddings, bos_token_id=base, eos_token_id=eos, pad_token_id=None,
        rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": s.rope_factor, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        attention_bias=False, mlp_bias=False, initializer_range=INIT_STD, dtype="bfloat16")
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.save_pretrained(out)
    GenerationConfig(bos_token_id=base, eos_token_id=eos).save_pretrained(out)


def write_weights(s: Shape, out: Path, seed: int, device: str, writers: int = 4) -> dict:
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator(device=device).manual_seed(seed)
    shards = shard_plan(s)
    n = len(shards)
    weight_map, total = {}, 0
    resid_scale = 1.0 / math.sqrt(2 * s.layers)
    t_gen = 0.0
    with ThreadPoolExecutor(max_workers=writers) as pool:
        futures = []
        for i, shard in enumerate(shards, start=1):
            fname = f"model-{i:05d}-of-{n:05d}.safetensors"
            t0 = time.time()
            tensors = {}
            for name, shape in shard:
                if len(shape) == 1:
                    t = torch.ones(shape, dtype=torch.bfloat16, device=device)
                else:
                    std = INIT_STD * (resid_scale if name.endswith(("o_proj.weight", "down_proj.weight")) else 1.0)
                    t = torch.randn(shape, generator=gen, dtype=torch.bfloat16, device=device).mul_(std)
                tensors[name] = t.cpu() if device != "cpu" else t
                weight_map[name] = fname
                total += t.numel() * 2
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


def marker(shape_name: str, role: str, s: Shape, seed: int) -> dict:
    return {"builder_version": BUILDER_VERSION, "shape": shape_name, "role": role, "seed": seed, **asdict(s)}


def is_built(d: Path, want: dict) -> bool:
    try:
        return json.loads((d / MARKER).read_text()) == want
    except (OSError, ValueError):
        return False


def build(out_dir: Path, shape_name: str = "full", roles: tuple = ("target", "draft"), seed: int = 0,
          device: Optional[str] = None) -> dict:
    """Build (or keep) each role's model under ``out_dir``; returns what was done, with timings."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    out_dir.mkdir(parents=True, exist_ok=True)
    shapes = SHAPES[shape_name]
    report: dict = {"device": device, "shape": shape_name, "models": {}}
    tok_dir: Optional[Path] = None
    for role in roles:
        s = shapes["target" if role == "eagle3" else role]
        want = marker(shape_name, role, s, seed + {"target": 0, "draft": 1, "eagle3": 2}[role])
        dst = out_dir / role
        if is_built(dst, want):
            report["models"][role] = {"path": str(dst), "kept": True}
            print(f"{role}: {dst} already built ({shape_name} shape), kept")
            continue
        t0 = time.time()
        tmp = out_dir / f".building-{role}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if tok_dir is None or not (tok_dir / "tokenizer.json").exists():
            tok_dir = out_dir / ".tokenizer"
            shutil.rmtree(tok_dir, ignore_errors=True)
            learned = build_tokenizer(s.vocab, tok_dir, corpus_bytes=(24 if shape_name == "full" else 1) << 20)
            report["tokenizer_learned_tokens"] = learned
        t_tok = time.time() - t0
        for f in tok_dir.iterdir():
            shutil.copy2(f, tmp / f.name)
        if role == "eagle3":
            w = write_eagle3(s, EAGLE3_DRAFT_VOCAB[shape_name], tmp, want["seed"], device)
        else:
            write_config(s, tmp)
            w = write_weights(s, tmp, want["seed"], device)
        (tmp / MARKER).write_text(json.dumps(want, indent=2))
        shutil.rmtree(dst, ignore_errors=True)
        tmp.rename(dst)
        secs = time.time() - t0
        report["models"][role] = {"path": str(dst), "kept": False, "seconds": round(secs, 1),
                                  "tokenizer_s": round(t_tok, 1), **w,
                                  "write_gb_per_s": round(w["bytes"] / 1e9 / max(secs - t_tok, 1e-3), 2)}
        print(f"{role}: {dst} built in {secs:.1f} s ({w['bytes'] / 1e9:.2f} GB in {w['shards']} shard(s), "
              f"tokenizer {t_tok:.1f} s, generation {w['generate_s']} s on {device})")
    shutil.rmtree(out_dir / ".tokenizer", ignore_errors=True)
    return report


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="make_shaped_models.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="full")
    ap.add_argument("--only", default="target,draft",
                    help="comma-separated roles: target, draft, eagle3 (an EAGLE3 head for the target; not by default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--report", default=None, help="write the timings as JSON here")
    a = ap.parse_args(argv)
    roles = tuple(r.strip() for r in a.only.split(",") if r.strip())
    bad = [r for r in roles if r not in ("target", "draft", "eagle3")]
    if bad or not roles:
        print(f"error: --only: unknown role {bad[0] if bad else '(none)'!r}; use target, draft, eagle3 (comma-separated)",
              file=sys.stderr)
        return 2
    rep = build(Path(a.out_dir), a.shape, roles, a.seed, a.device)
    if a.report:
        Path(a.report).write_text(json.dumps(rep, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
