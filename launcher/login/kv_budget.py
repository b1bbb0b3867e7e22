"""The KV cache's size per token of a model, from its config.json: what an engine that caps its KV
pool in tokens (SGLang's --max-total-tokens) needs to follow the recipe's budget in bytes
(server.kv_cache_memory_bytes). Reads files on the login side; the rest is pure.

Per token a decoder layer keeps a key and a value of num_key_value_heads x head_dim elements, so
bytes per token = 2 x layers x KV heads x head size x bytes per element (bf16/fp16: 2, fp32: 4).
A draft model with a KV cache of its own (STANDALONE's draft, an EAGLE3 head's layer) keeps its own
pool of the same number of tokens, so the budget pays for both.
"""
from __future__ import annotations

from typing import Mapping, Optional

from launcher.runtime.checkpoint import DTYPE_NAMES, checkpoint_config

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}  # by launcher.runtime.checkpoint's names


def bytes_per_token(config: Mapping, dtype: Optional[str] = None) -> Optional[int]:
    """KV bytes per token of one model's config.json (``dtype``: the server's --dtype, else the
    config's torch_dtype / dtype, else bf16); None when the config lacks the layer or head counts."""
    cfg = dict(config.get("text_config") or config)  # multimodal configs nest the language model's
    try:
        layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
    except (KeyError, TypeError, ValueError):
        return None
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or int(cfg.get("hidden_size") or 0) // heads)
    if head_dim <= 0:
        return None
    name = str(dtype if dtype not in (None, "auto") else cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return 2 * layers * kv_heads * head_dim * DTYPE_BYTES.get(DTYPE_NAMES.get(name.lower(), ""), 2)


def model_bytes_per_token(model: Optional[str], draft: Optional[str], dtype: Optional[str]) -> Optional[int]:
    """KV bytes per token of the target plus, where it has its own cache, the draft; None when the
    target's config cannot be read here (a draft's that cannot be read adds nothing)."""
    target = bytes_per_token(checkpoint_config(model), dtype)
    if target is None:
        return None
    return target + (bytes_per_token(checkpoint_config(draft), dtype) or 0)


__all__ = ["bytes_per_token", "model_bytes_per_token"]
