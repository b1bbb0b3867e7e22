"""Make the tiny offline target and drafts used by the smoke recipe and the tests.

No model can be downloaded here, so we build one: a byte-level BPE tokenizer
trained on local text, and a 2-layer Llama (head size 64, which the CPU
attention backend needs). Three checkpoints share the tokenizer:

  tiny-target           lm_head scaled by 40 so greedy decoding is sharp
  tiny-draft-identical  the target itself: every draft is accepted
  tiny-draft-noisy      the target plus Gaussian noise (0.15 x each matrix's std):
                        a mixed acceptance histogram at temperature 0

and one made from the target afterwards (kept apart, so the three above never change):

  tiny-target-context-free  the target with every attention output projection zeroed: its
                        next token depends on the last token only, so a draft that reads
                        the context wrongly (SGLang 0.5.17's STANDALONE drops the first
                        token: docs/sglang.md) still drafts the target's own tokens

Outputs are gibberish; the speculative-decoding mechanics are real.
Run with a Python that has torch, transformers and tokenizers (the vllm venv).
Idempotent: existing complete checkpoints are kept.
"""
from __future__ import annotations

import glob
import shutil
import sys
from pathlib import Path

SEED = 1234
NAMES = ("tiny-target", "tiny-draft-identical", "tiny-draft-noisy")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _complete(d: Path) -> bool:
    return (d / "config.json").exists() and (d / "model.safetensors").exists() and (d / "tokenizer.json").exists()


def _train_tokenizer(out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    files = [f for f in files if Path(f).is_file()]
    if not files:
        raise SystemExit("make_tiny_models: no text in /usr/share/common-licenses to train the tokenizer on")
    specials = ["<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>",
                                   unk_token="<unk>", pad_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


CONTEXT_FREE = "tiny-target-context-free"


def context_free(root_p: Path) -> None:
    """tiny-target with each layer's attention output projection (o_proj) zeroed: the residual
    stream never takes in another position, so the next token is a function of the last one."""
    import torch
    from transformers import LlamaForCausalLM

    dst = root_p / CONTEXT_FREE
    if _complete(dst):
        return
    tmp = root_p / ".building-context-free"
    shutil.rmtree(tmp, ignore_errors=True)
    model = LlamaForCausalLM.from_pretrained(root_p / "tiny-target", torch_dtype=torch.bfloat16)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
    model.save_pretrained(tmp, safe_serialization=True)
    for f in (root_p / "tiny-target").iterdir():
        if f.is_file() and not (tmp / f.name).exists():
            shutil.copy2(f, tmp / f.name)  # the tokenizer and chat template
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)
    print(f"tiny model written: {dst}")


def main(root: str) -> None:
    root_p = Path(root)
    if all(_complete(root_p / n) for n in NAMES):
        print(f"tiny models already present in {root_p}")
    else:
        build(root_p)
    context_free(root_p)


def build(root_p: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    tmp = root_p / ".building"
    shutil.rmtree(tmp, ignore_errors=True)
    tok_dir = tmp / "tokenizer"
    tok = _train_tokenizer(tok_dir)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=64, max_position_embeddings=2048, tie_word_embeddings=False,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, torch_dtype="bfloat16")
    target = LlamaForCausalLM(cfg)
    with torch.no_grad():
        target.lm_head.weight.mul_(40.0)
    gen = torch.Generator().manual_seed(SEED + 1)
    noisy = LlamaForCausalLM(cfg)
    noisy.load_state_dict(target.state_dict())
    with torch.no_grad():
        for p in noisy.parameters():
            if p.dim() >= 2:
                p.add_(torch.randn(p.shape, generator=gen) * 0.15 * p.float().std())
    for name, model in (("tiny-target", target), ("tiny-draft-identical", target), ("tiny-draft-noisy", noisy)):
        d = tmp / name
        model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
        for f in tok_dir.iterdir():
            shutil.copy2(f, d / f.name)  # includes chat_template.jinja (transformers 5)
    root_p.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        dst = root_p / name
        shutil.rmtree(dst, ignore_errors=True)
        (tmp / name).rename(dst)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"tiny models written to {root_p}: {', '.join(NAMES)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_tiny_models.py OUT_DIR")
    main(sys.argv[1])
