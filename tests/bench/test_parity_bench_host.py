"""issue 41 item 10: tests/benchmarks/bench_parity_specdec_bench.py --gpu printed "(2-core shared
machine: noisy)" on an H200. Its Output TPS line names the host the run recorded."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_parity", ROOT / "tests/benchmarks/bench_parity_specdec_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _point(gpu: str, tps: float):
    acc = {"Request_AL": {"q1": 2.5, "q2": 3.0}, "Acceptance_Length_Histogram": {"1": 3, "4": 5}}
    return SimpleNamespace(acceptance=acc, average_al=2.75, server_al=2.7, output_tps=tps,
                           configuration={"gpu": gpu, "specdec_launcher": {}})


def _tps_line(capsys, gpu: str, monkeypatch, cpus: int) -> str:
    bench = _bench()
    monkeypatch.setattr(bench.os, "cpu_count", lambda: cpus)
    bench.compare(_point(gpu, 2502.4), _point(gpu, 2706.3), 8, 3)
    return next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Output TPS"))


def test_a_gpu_run_names_its_gpu_not_a_two_core_machine(capsys, monkeypatch):
    line = _tps_line(capsys, "NVIDIA H200", monkeypatch, 16)
    assert "2-core" not in line and "NVIDIA H200" in line and "16 CPU cores" in line, line


def test_a_cpu_run_says_how_many_cores(capsys, monkeypatch):
    line = _tps_line(capsys, "cpu", monkeypatch, 2)
    assert "2 CPU cores, no GPU" in line, line


def test_the_questions_are_an_argument_not_a_path_of_one_machine(capsys):
    """issue 52: --fastchat defaulted to the mirror folder of the machine the script was written on."""
    ap = _bench().parser()
    try:
        ap.parse_args(["/modelopt"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("the parity benchmark ran without its MT-Bench questions")
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "one of the arguments --mtbench --fastchat is required" in err, err
    a = ap.parse_args(["/modelopt", "--mtbench", "/data/question.jsonl"])
    assert (a.mtbench, a.fastchat) == ("/data/question.jsonl", None)
