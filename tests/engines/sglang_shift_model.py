"""What SGLang 0.5.17's STANDALONE draft does to the known answer, computed on the CPU.

SGLang's STANDALONE worker inherits EAGLE's draft input: the draft model is fed the sequence
shifted by one token (``input_ids[1:]`` plus the token just sampled, at positions 0..n-1), so it
reads the context without its first token (docs/sglang.md). With the target as its own draft, a
draft token then equals the target's only where the first token does not change the next one.

This script runs that chain at T = 0 with Hugging Face transformers (float32 on the CPU): per
prompt (a chat-templated question), the target decodes greedily from the whole context; the draft,
the same weights, proposes k tokens from the context without its first token; drafts are accepted
while they equal the target's tokens, then the target's bonus token follows (SGLang's greedy
verify). It prints one JSON line: the acceptance length 1 + accepted / steps over all prompts, and
the share of first drafts accepted.

    python sglang_shift_model.py MODEL_DIR QUESTIONS.jsonl [--k 3] [--tokens 64] [--prompts 8] [--full]

``--full`` drafts from the whole context instead (what a correct STANDALONE does): every draft is
accepted. Run with a Python that has torch and transformers (the vllm venv).
"""
from __future__ import annotations

import argparse
import json


def chain(model, prompt_ids: list[int], k: int, tokens: int, shift: bool) -> tuple[int, int, int]:
    """(verify steps, accepted drafts, first drafts accepted) of one greedy reply."""
    import torch

    def next_token(ids: list[int]) -> int:
        with torch.no_grad():
            return int(model(torch.tensor([ids])).logits[0, -1].argmax())

    seq = list(prompt_ids)
    seq.append(next_token(seq))  # the prefill's token
    steps = accepted = first = 0
    while len(seq) - len(prompt_ids) < tokens:
        ctx = seq[1:] if shift else list(seq)
        drafts = []
        for _ in range(k):
            drafts.append(next_token(ctx + drafts))
        n = 0
        for d in drafts:
            t = next_token(seq)
            if d != t:
                seq.append(t)  # the target's token where the draft was rejected
                break
            seq.append(d)
            n += 1
        else:
            seq.append(next_token(seq))  # the bonus token after k accepted drafts
        steps += 1
        accepted += n
        first += n > 0
    return steps, accepted, first


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("questions")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--full", action="store_true", help="draft from the whole context (no shift)")
    a = p.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype="float32").eval()
    with open(a.questions) as f:
        questions = [json.loads(line)["turns"][0] for line in f if line.strip()][: a.prompts]
    s = acc = first = 0
    for q in questions:
        text = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        ids = list(tok(text, add_special_tokens=False)["input_ids"])
        st, ac, fi = chain(model, ids, a.k, a.tokens, shift=not a.full)
        s, acc, first = s + st, acc + ac, first + fi
    print(json.dumps({"model": a.model, "k": a.k, "prompts": len(questions), "tokens": a.tokens,
                      "shift": not a.full, "steps": s, "accepted": acc, "al": 1 + acc / s,
                      "first_draft_accepted": first / s}))


if __name__ == "__main__":
    main()
