"""Unit tests for launcher.runtime.telemetry, with a fake NVML (no GPU needed)."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from launcher.runtime import telemetry
from launcher.runtime.telemetry import GIB, GpuMemorySampler, gpu_name_list, gpu_names


class FakeNVMLError(Exception):
    pass


class FakeNVML:
    """A stand-in for the pynvml module: just the functions the sampler uses.

    ``used`` maps a device index to its used bytes; tests change it while
    the sampler runs. ``script`` optionally gives, per device, a list of
    readings returned one per query (the last one repeats).
    """

    NVMLError = FakeNVMLError

    def __init__(self, names=("Fake H200",), total=144 * GIB, used=None, init_error=None,
                 driver="580.00.01"):
        self.names = list(names)
        self.total = total
        self.used = dict(used or {i: GIB for i in range(len(self.names))})
        self.init_error = init_error
        self.driver = driver
        self.script: dict[int, list[int]] = {}
        self.fail_queries = False
        self.fail_after = None  # fail every memory query after this many
        self.inits = 0
        self.shutdowns = 0
        self.queries = 0
        self.lock = threading.Lock()

    def nvmlInit(self):
        if self.init_error is not None:
            raise self.init_error
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetNVMLVersion(self):
        return "13.580.00"

    def nvmlDeviceGetCount(self):
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < len(self.names):
            raise FakeNVMLError("Invalid Argument")
        return ("handle", i)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for i in range(len(self.names)):
            if self._uuid(i) == uuid:
                return ("handle", i)
        raise FakeNVMLError("Not Found")

    def nvmlDeviceGetIndex(self, h):
        return h[1]

    def nvmlDeviceGetName(self, h):
        return self.names[h[1]].encode()  # old pynvml returns bytes

    @staticmethod
    def _uuid(i):
        return f"GPU-{i:08d}-0000-0000-0000-000000000000"

    def nvmlDeviceGetUUID(self, h):
        return self._uuid(h[1])

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        with self.lock:
            self.queries += 1
            if self.fail_queries or (self.fail_after is not None and self.queries > self.fail_after):
                raise FakeNVMLError("GPU is lost")
            i = h[1]
            if self.script.get(i):
                seq = self.script[i]
                used = seq.pop(0) if len(seq) > 1 else seq[0]
            else:
                used = self.used[i]
        return SimpleNamespace(total=self.total, used=used, free=self.total - used)


def test_no_driver_reports_unavailable_and_writes_file(tmp_path):
    nvml = FakeNVML(init_error=FakeNVMLError("NVML Shared Library Not Found"))
    with GpuMemorySampler(interval_s=0.01, kv_cache_cap_bytes=8 * GIB, nvml=nvml) as s:
        time.sleep(0.03)
    out = s.write_report(tmp_path / "job" / "gpu_telemetry.json")
    data = json.loads(out.read_text())
    assert data["available"] is False
    assert "NVML Shared Library Not Found" in data["reason"]
    assert data["gpus"] == []
    assert data["peak_total_gib"] is None
    assert data["samples"] == 0
    assert data["kv_cache_cap_set"] is True
    assert data["kv_cache_cap_bytes"] == 8 * GIB
    assert data["kv_cache_cap_gib"] == 8.0
    assert nvml.shutdowns == 0  # nothing to shut down: init failed


def test_pynvml_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(telemetry, "_real_nvml", lambda: None)
    s = GpuMemorySampler(interval_s=0.01)
    s.start()
    s.stop()
    data = json.loads(s.write_report(tmp_path / "t.json").read_text())
    assert data["available"] is False
    assert "not installed" in data["reason"]
    assert data["kv_cache_cap_set"] is False and data["kv_cache_cap_bytes"] is None
    assert gpu_names() == "cpu"
    assert gpu_name_list() == []


def test_real_pynvml_on_this_machine_never_raises(tmp_path):
    # Whatever this machine has (CI: no GPU), the real binding must not raise.
    with GpuMemorySampler(interval_s=0.05) as s:
        time.sleep(0.12)
    data = json.loads(s.write_report(tmp_path / "t.json").read_text())
    assert isinstance(data["available"], bool)
    if not data["available"]:
        assert data["reason"]
        assert gpu_names() == "cpu"
    else:
        assert data["gpus"] and gpu_names() != "cpu"


def test_zero_gpus():
    nvml = FakeNVML(names=())
    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None) as s:
        pass
    r = s.report()
    assert r["available"] is False and "no NVIDIA GPU" in r["reason"]
    assert nvml.shutdowns == nvml.inits == 1


def test_peak_and_baseline_from_background_samples():
    nvml = FakeNVML(names=("Fake H200", "Fake H200"), used={0: 1 * GIB, 1: 2 * GIB})
    def sampled_twice():  # the background thread has read every GPU at least twice since now (a loaded machine is slow)
        start = nvml.queries
        deadline = time.monotonic() + 10
        while nvml.queries < start + 4 and time.monotonic() < deadline:
            time.sleep(0.005)

    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None) as s:
        sampled_twice()
        nvml.used[0] = 5 * GIB  # the job allocates 4 GiB on GPU 0
        sampled_twice()
        nvml.used[0] = 1 * GIB  # ... and frees it before the end
        nvml.used[1] = 3 * GIB  # GPU 1 peaks later
        sampled_twice()
    r = s.report()
    assert r["available"] is True and r["reason"] is None
    assert r["driver_version"] == "580.00.01"
    assert r["samples"] >= 5  # baseline + background + final
    g0, g1 = r["gpus"]
    assert g0 == {
        "index": 0, "name": "Fake H200", "uuid": FakeNVML._uuid(0), "total_gib": 144.0,
        "baseline_used_gib": 1.0, "peak_used_gib": 5.0, "peak_increase_gib": 4.0,
    }
    assert g1["baseline_used_gib"] == 2.0 and g1["peak_used_gib"] == 3.0
    # The simultaneous total peaked at 5 + 2 = 7; the per-GPU peaks sum to 8.
    assert r["peak_total_gib"] == 7.0
    assert r["sum_of_peaks_gib"] == 8.0
    assert r["baseline_total_gib"] == 3.0
    assert r["interval_s"] == 0.01
    assert r["memory_info_version"] == "v1"
    assert nvml.shutdowns == 1


def test_scripted_readings_peak_is_max_and_baseline_is_first():
    nvml = FakeNVML(names=("A",))
    nvml.script[0] = [int(0.5 * GIB), 3 * GIB, 7 * GIB, 2 * GIB]
    nvml.script[0].insert(0, 0)  # start() reads the total first: this reading goes there
    s = GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None)
    s.start()
    deadline = time.monotonic() + 2
    while s.report()["samples"] < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    s.stop()
    g = s.report()["gpus"][0]
    assert g["baseline_used_gib"] == 0.5
    assert g["peak_used_gib"] == 7.0
    assert g["peak_increase_gib"] == 6.5


def test_sampling_runs_in_a_daemon_thread_and_stop_joins_it():
    nvml = FakeNVML()
    s = GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None).start()
    assert s._thread is not None and s._thread.daemon and s._thread.is_alive()
    time.sleep(0.05)
    s.stop()
    assert not s._thread.is_alive()
    n = nvml.queries
    time.sleep(0.05)
    assert nvml.queries == n  # nothing samples after stop()
    s.stop()  # idempotent
    assert nvml.shutdowns == 1


def test_sample_errors_are_counted_not_raised():
    nvml = FakeNVML()
    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None) as s:
        nvml.fail_queries = True
        time.sleep(0.05)
        nvml.fail_queries = False
    r = s.report()
    assert r["available"] is True
    assert r["sample_errors"] >= 1
    assert r["samples"] >= 2  # baseline + final


def test_every_query_failing_is_reported_unavailable():
    nvml = FakeNVML()
    nvml.fail_after = 1  # start() reads the total; every used-memory read then fails
    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None) as s:
        time.sleep(0.03)
    r = s.report()
    assert r["available"] is False and "failed" in r["reason"]


def test_failure_inside_setup_never_raises():
    nvml = FakeNVML()
    nvml.nvmlDeviceGetMemoryInfo = lambda h, version=None: (_ for _ in ()).throw(RuntimeError("boom"))
    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None) as s:
        pass
    r = s.report()
    assert r["available"] is False and "boom" in r["reason"]
    assert nvml.shutdowns == 1


@pytest.mark.parametrize(
    "cvd, expected",
    [
        (None, [0, 1, 2, 3]),
        ("2", [2]),
        ("3,1", [3, 1]),
        (" 1 , 2 ", [1, 2]),
        ("1,-1,2", [1]),  # CUDA stops at the first invalid entry
        ("1,7,2", [1]),  # index past the end: the rest is ignored too
        (FakeNVML._uuid(2), [2]),
        (f"{FakeNVML._uuid(3)},{FakeNVML._uuid(0)}", [3, 0]),
        ("MIG-abcdef", [0, 1, 2, 3]),  # cannot map: sample all, with a note
    ],
)
def test_cuda_visible_devices(cvd, expected):
    nvml = FakeNVML(names=("G0", "G1", "G2", "G3"))
    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=cvd) as s:
        pass
    r = s.report()
    assert r["available"] is True
    assert [g["index"] for g in r["gpus"]] == expected
    assert [g["name"] for g in r["gpus"]] == [f"G{i}" for i in expected]
    assert r["visible_devices"] == cvd
    assert ("visible_devices_note" in r) == (cvd == "MIG-abcdef")


@pytest.mark.parametrize("cvd", ["", "-1", "9"])
def test_cuda_visible_devices_hiding_everything(cvd):
    nvml = FakeNVML(names=("G0", "G1"))
    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=cvd) as s:
        pass
    r = s.report()
    assert r["available"] is False
    assert "CUDA_VISIBLE_DEVICES" in r["reason"]
    assert nvml.shutdowns == 1


def test_env_var_is_read_by_default(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    nvml = FakeNVML(names=("G0", "G1"))
    with GpuMemorySampler(interval_s=0.01, nvml=nvml) as s:
        pass
    assert [g["index"] for g in s.report()["gpus"]] == [1]
    assert gpu_names(nvml=nvml) == "G1"


def test_memory_info_v2_used_when_binding_has_it_and_falls_back():
    class V2NVML(FakeNVML):
        nvmlMemory_v2 = 0x02000028

        def __init__(self, v2_works, **kw):
            super().__init__(**kw)
            self.v2_works = v2_works
            self.versions = []

        def nvmlDeviceGetMemoryInfo(self, h, version=None):
            self.versions.append(version)
            if version and not self.v2_works:
                raise FakeNVMLError("Function Not Found")
            return super().nvmlDeviceGetMemoryInfo(h)

    ok = V2NVML(True)
    with GpuMemorySampler(interval_s=0.01, nvml=ok, visible_devices=None) as s:
        pass
    assert s.report()["memory_info_version"] == "v2"
    assert set(ok.versions) == {V2NVML.nvmlMemory_v2}

    old = V2NVML(False)
    with GpuMemorySampler(interval_s=0.01, nvml=old, visible_devices=None) as s:
        pass
    r = s.report()
    assert r["available"] is True and r["memory_info_version"] == "v1"
    assert old.versions[0] == V2NVML.nvmlMemory_v2 and old.versions[-1] is None


def test_gpu_names_label():
    assert gpu_names(nvml=FakeNVML(names=("NVIDIA H200",) * 8), visible_devices=None) == "NVIDIA H200"
    mixed = FakeNVML(names=("NVIDIA H200", "NVIDIA A100", "NVIDIA H200"))
    assert gpu_names(nvml=mixed, visible_devices=None) == "NVIDIA H200, NVIDIA A100"
    assert gpu_name_list(nvml=mixed, visible_devices=None) == ["NVIDIA H200", "NVIDIA A100", "NVIDIA H200"]
    assert gpu_names(nvml=FakeNVML(init_error=FakeNVMLError("no driver"))) == "cpu"
    assert gpu_names(nvml=FakeNVML(names=())) == "cpu"
    nvml = FakeNVML(names=("G0",))
    gpu_names(nvml=nvml, visible_devices=None)
    assert nvml.inits == nvml.shutdowns == 1


def test_report_is_json_and_written_atomically(tmp_path):
    nvml = FakeNVML()
    with GpuMemorySampler(interval_s=0.01, nvml=nvml, visible_devices=None) as s:
        pass
    path = tmp_path / "gpu_telemetry.json"
    s.write_report(path)
    assert json.loads(path.read_text()) == s.report()
    assert [p.name for p in tmp_path.iterdir()] == ["gpu_telemetry.json"]
    data = json.loads(path.read_text())
    assert set(data) >= {
        "available", "reason", "driver_version", "gpus", "peak_total_gib", "samples",
        "interval_s", "kv_cache_cap_set", "kv_cache_cap_bytes",
    }


def test_rejects_bad_interval():
    with pytest.raises(ValueError):
        GpuMemorySampler(interval_s=0)
