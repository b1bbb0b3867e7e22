"""The machine record of a point (launcher.runtime.machine): pure window summaries of the
node's samples, the host's facts, and the sampler against a fake NVML."""
import json
from pathlib import Path

from launcher.runtime import machine


def _s(t, sm=1980, reasons=0, cpu=None, eng=None, load=1.0):
    return {"t": t, "gpus": [{"sm_mhz": sm, "util_pct": 90, "power_w": 500.0, "temp_c": 50, "reasons": reasons}],
            "cpu": cpu, "load1": load, "engine_cpu_s": eng}


def test_window_takes_only_the_points_samples_and_names_slowing_reasons():
    samples = [_s(0.0, sm=345, reasons=0x1), _s(1.0, sm=1980), _s(2.0, sm=1755, reasons=0x4),
               _s(3.0, sm=1980), _s(9.0, sm=100, reasons=0x40)]
    w = machine.window_summary(samples, 1.0, 3.0)
    g = w["gpus"][0]
    assert w["samples"] == 3
    assert g["sm_mhz"] == {"min": 1755.0, "median": 1980.0, "max": 1980.0}
    assert g["reasons_seen"] == ["sw_power_cap"] and g["slowed_share"] == round(1 / 3, 3)


def test_cpu_shares_and_engine_cores_come_from_the_deltas_across_the_window():
    #            user nice sys idle iowait irq softirq steal
    before = [100, 0, 0, 100, 0, 0, 0, 0]
    after = [160, 0, 20, 110, 0, 0, 0, 10]   # +100 jiffies: 80 busy, 10 idle, 10 steal
    samples = [_s(0.5, cpu=before, eng=10.0), _s(1.5, cpu=after, eng=12.0, load=3.5)]
    w = machine.window_summary(samples, 1.0, 2.0)
    assert w["cpu_busy_share"] == 0.9 and w["cpu_steal_share"] == 0.1
    assert w["engine_cpu_s"] == 2.0 and w["engine_cores"] == 2.0
    assert w["load1_max"] == 3.5


def test_a_server_restart_inside_the_window_gives_no_negative_cpu_time():
    w = machine.window_summary([_s(1.0, eng=50.0), _s(2.0, eng=3.0)], 1.0, 2.0)
    assert w["engine_cpu_s"] is None and w["engine_cores"] is None


def test_no_samples_give_nulls_not_errors():
    w = machine.window_summary([], 0, 1)
    assert w["samples"] == 0 and w["gpus"] == [] and w["cpu_busy_share"] is None
    assert machine.compact(w)["sm_mhz"] is None
    assert machine.one_line(None) == "machine not recorded"


def test_reason_names_and_cpu_model():
    assert machine.reason_names(0x1 | 0x20) == ["gpu_idle", "sw_thermal_slowdown"]
    assert machine.reason_names(0x1000) == ["0x1000"]
    assert machine.cpu_model("processor : 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n") == \
        "AMD EPYC 9654 96-Core Processor"
    assert machine.read_cpu_jiffies("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 1 1 1\n") == [1, 2, 3, 4, 5, 6, 7, 8]
    facts = machine.host_facts()
    assert facts["cores"] >= 1 and facts["usable_cores"] >= 1
    # the boot id tells two leases of hosts that share a name apart (Linux has one per boot)
    assert facts["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_one_line_names_gpu_host_clock_and_reasons():
    m = {"gpu": "NVIDIA H200", "host": {"cores": 16, "cpu_model": "Xeon"},
         "window": machine.window_summary([_s(1.0, sm=1980), _s(2.0, sm=1500, reasons=0x4)], 1.0, 2.0)}
    line = machine.one_line(m)
    assert line.startswith("NVIDIA H200 on 16 x Xeon; SM 1740 MHz (1500-1980)")
    assert "slowed by sw_power_cap in 50% of samples" in line


class FakeNvml:
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, count: int = 1):
        self.shut = False
        self.count = count
        self.energy = 0

    def nvmlInit(self): pass
    def nvmlShutdown(self): self.shut = True
    def nvmlDeviceGetCount(self): return self.count
    def nvmlDeviceGetHandleByIndex(self, i): return i
    def nvmlDeviceGetClockInfo(self, h, kind): return 1980
    def nvmlDeviceGetUtilizationRates(self, h): return type("U", (), {"gpu": 97})()
    def nvmlDeviceGetPowerUsage(self, h): return 612_345
    def nvmlDeviceGetTemperature(self, h, kind): return 61
    def nvmlDeviceGetCurrentClocksEventReasons(self, h): return 0x4

    def nvmlDeviceGetTotalEnergyConsumption(self, h):  # mJ since the driver loaded: it only rises
        self.energy += 1000 * (h + 1)
        return 10 ** 9 * h + self.energy


def test_sampler_writes_one_line_a_sample_with_the_engine_cpu_time(tmp_path, monkeypatch):
    import os
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nv = FakeNvml()
    path = tmp_path / "logs" / machine.SAMPLES_FILE
    s = machine.MachineSampler(path, interval_s=0.05, engine_pids=lambda: [os.getpid()], nvml=nv).start()
    import time
    time.sleep(0.3)
    s.stop()
    rows = machine.read_samples(path)
    assert len(rows) >= 2 and nv.shut
    g = rows[-1]["gpus"][0]
    assert {k: v for k, v in g.items() if k != "energy_mj"} == \
        {"sm_mhz": 1980, "util_pct": 97, "power_w": 612.3, "temp_c": 61, "reasons": 4}
    counters = [r["gpus"][0]["energy_mj"] for r in rows]  # the energy counter, read in every sample
    assert all(isinstance(e, int) for e in counters) and counters == sorted(counters) and counters[-1] > counters[0]
    assert rows[-1]["engine_cpu_s"] > 0 and len(rows[-1]["cpu"]) == 8
    path.write_text(path.read_text() + '{"t": 1, "gpus"')  # a torn last line is skipped
    assert len(machine.read_samples(path)) == len(rows)
    assert json.loads(path.read_text().splitlines()[0])["t"] > 0


def test_machines_line_names_each_host_and_the_clock_range_over_points():
    a = {"gpu": "NVIDIA H200", "host": {"cores": 16, "cpu_model": "Xeon"},
         "window": machine.window_summary([_s(1.0, sm=1980, cpu=[0] * 8), _s(2.0, sm=1980, cpu=[90, 0, 0, 0, 0, 0, 0, 10])], 1.0, 2.0)}
    b = {"gpu": "NVIDIA H200", "host": {"cores": 16, "cpu_model": "Xeon"},
         "window": machine.window_summary([_s(1.0, sm=1410, reasons=0x20)], 1.0, 2.0)}
    line = machine.machines_line([a, b, None])
    assert line == ("NVIDIA H200 on 16 x Xeon; SM clock 1410-1980 MHz (medians over 2 points), "
                    "slowed by sw_thermal_slowdown; CPU steal up to 10.0%")
    assert machine.machines_line([]) == "machine not recorded"


def test_a_window_the_sampler_missed_closes_on_the_next_sample():
    """A repeat shorter than the sampling period (or one the sampler missed under load) has
    no sample inside: its engine cores and CPU shares come from the samples around it."""
    before = [100, 0, 0, 100, 0, 0, 0, 0]
    after = [150, 0, 0, 150, 0, 0, 0, 0]
    samples = [_s(0.5, cpu=before, eng=10.0), _s(1.5, cpu=after, eng=11.0), _s(2.5, cpu=after, eng=99.0)]
    w = machine.window_summary(samples, 0.8, 1.2)
    assert w["samples"] == 0
    assert w["engine_cpu_s"] == 1.0 and w["engine_cores"] == 1.0  # the next sample only, not the one after
    assert w["cpu_busy_share"] == 0.5
    inside = machine.window_summary(samples, 0.4, 1.6)  # samples inside: the window's own deltas, as before
    assert inside["engine_cpu_s"] == 1.0 and inside["samples"] == 2


def test_the_host_record_times_one_core_and_the_lines_give_it():
    """One core's speed is in every point's host facts (the draft-model path is bound by one core,
    and a KVM guest's CPU name says little), measured once per process, and the machine lines
    carry it: one figure per point, the range over a folder's points."""
    facts = machine.host_facts()
    assert 0 < facts["one_core_ms"] < 10_000
    assert machine.host_facts()["one_core_ms"] == facts["one_core_ms"]  # cached: timed once
    m = {"gpu": "NVIDIA H100", "host": {"cores": 16, "cpu_model": "Xeon", "one_core_ms": 61.5}}
    assert machine.one_line(m).startswith("NVIDIA H100 on 16 x Xeon (one core 61.5 ms)")
    other = {"gpu": "NVIDIA H100", "host": {"cores": 16, "cpu_model": "Xeon", "one_core_ms": 70.0}}
    line = machine.machines_line([m, other, {"gpu": "NVIDIA H100", "host": {"cores": 16, "cpu_model": "Xeon"}}])
    assert line == "NVIDIA H100 on 16 x Xeon; one core 61.5-70 ms for 2e6 Python additions, best of 5"
    assert "one core" not in machine.machines_line([{"gpu": "g", "host": {"cores": 1, "cpu_model": "c"}}])
