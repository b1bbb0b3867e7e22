"""A GPU's energy over a repeat's window from its own counter (launcher.runtime.energy), as the
machine record summarises it (launcher.runtime.machine) and the sampler reads it (fake NVML)."""
import time

import pytest

from launcher.runtime import machine
from launcher.runtime.energy import counter_at, window_energy
from tests.test_machine import FakeNvml


def _s(t, *energies):
    return {"t": t, "gpus": [{"power_w": 500.0, "energy_mj": e} for e in energies], "cpu": None, "load1": None,
            "engine_cpu_s": None}


def test_the_counter_is_read_off_the_line_between_the_samples_around_each_end():
    readings = [(0.0, 0.0), (1.0, 500_000.0), (2.0, 1_100_000.0), (3.0, 1_500_000.0)]
    assert counter_at(readings, 0.5) == 250_000 and counter_at(readings, 2.5) == 1_300_000
    assert counter_at(readings, 3.5) is None and counter_at(readings, -1) is None
    # (1,300,000 - 250,000) mJ over [0.5, 2.5], all of it between readings
    assert window_energy(readings, 0.5, 2.5) == {"energy_j": 1050.0, "covered_share": 1.0}


def test_a_window_the_readings_cover_in_part_is_scaled_by_the_power_they_saw():
    readings = [(0.0, 0.0), (1.0, 500_000.0), (2.0, 1_100_000.0)]  # the sampler stopped at t=2
    # [0.5, 2.0] covered: 850 J in 1.5 s, so 2.5 s of window at that mean power
    got = window_energy(readings, 0.5, 3.0)
    assert got["covered_share"] == 0.6 and got["energy_j"] == pytest.approx(850 * 2.5 / 1.5, abs=1e-3)


@pytest.mark.parametrize("readings", [[(0.0, 5.0e6), (1.0, 1.0e3)],  # the driver reloaded: the counter restarted
                                      [(0.0, None), (1.0, None)],     # no counter (a GPU before Volta)
                                      [(5.0, 1.0), (6.0, 2.0)]])      # nothing inside the window
def test_no_energy_where_the_counter_cannot_tell(readings):
    assert window_energy(readings, 0.0, 1.0) is None


def test_the_window_gives_each_gpus_joules_and_the_repeat_row_carries_them():
    samples = [_s(0.0, 0, 7_000), _s(1.0, 600_000, 407_000), _s(2.0, 1_200_000, 807_000)]
    w = machine.window_summary(samples, 0.5, 1.5)
    assert [g["energy_j"] for g in w["gpus"]] == [600.0, 400.0]
    row = machine.compact(w)
    assert row["gpu_energy_j"] == [600.0, 400.0] and row["window_s"] == 1.0
    none = machine.compact(machine.window_summary([_s(0.0, None), _s(1.0, None)], 0.0, 1.0))
    assert none["gpu_energy_j"] is None and none["power_w"] == 500.0  # the power samples stay


def test_the_sampler_reads_the_counter_of_the_visible_gpus_only(tmp_path, monkeypatch):
    """CUDA_VISIBLE_DEVICES=1 on a node of two: the samples are GPU 1's (its counter), not GPU 0's."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    path = tmp_path / machine.SAMPLES_FILE
    s = machine.MachineSampler(path, interval_s=0.05, nvml=FakeNvml(count=2)).start()
    time.sleep(0.25)
    s.stop()
    rows = machine.read_samples(path)
    assert rows and all(len(r["gpus"]) == 1 for r in rows)
    assert all(r["gpus"][0]["energy_mj"] > 10 ** 9 for r in rows)  # the fake's GPU 1 counts from 1e9 mJ


def test_a_gpu_without_the_counter_samples_null():
    class Old(FakeNvml):
        nvmlDeviceGetTotalEnergyConsumption = None  # an NVML without the call

    s = machine.MachineSampler("/dev/null", nvml=Old())
    s._handles = [0]
    assert s.sample()["gpus"][0]["energy_mj"] is None
