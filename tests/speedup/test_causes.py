"""The causes of a point's step cost (launcher.speedup.causes) at and around each threshold of
THRESHOLDS, on made-up machine rows shaped like launcher.runtime.machine.compact's."""
from __future__ import annotations

from launcher.runtime import machine
from launcher.speedup.causes import THRESHOLDS, Thresholds, causes, legend, words


def rep(util=100.0, cores=0.7, slowed=0.0, steal=0.0, mhz=1980.0) -> dict:
    return {"util_pct": util, "engine_cores": cores, "slowed_share": slowed, "cpu_steal_share": steal, "sm_mhz": mhz}


def names(spec, base=(), differing=(), sm=None, bm=None, t=THRESHOLDS) -> list[str]:
    return [c.word for c in causes(list(spec), list(base), list(differing), sm, bm, t)]


def test_busy_gpu_is_gpu_bound_whatever_the_engine_used():
    assert names([rep(util=THRESHOLDS.gpu_busy_pct, cores=1.2)]) == ["GPU-bound"]


def test_one_core_and_a_waiting_gpu_is_host_bound():
    t = THRESHOLDS
    assert names([rep(util=t.gpu_busy_pct - 1, cores=t.engine_cores_near_one)]) == ["host-bound"]
    assert names([rep(util=t.gpu_busy_pct - 1, cores=t.engine_cores_near_one - 0.01)]) == []  # neither
    assert names([]) == []  # no GPU record: no bound named


def test_the_median_over_repeats_decides():
    t = THRESHOLDS
    low, high = t.gpu_busy_pct - 10, t.gpu_busy_pct
    assert names([rep(util=low, cores=1.1), rep(util=high, cores=1.1), rep(util=high, cores=1.1)]) == ["GPU-bound"]
    assert names([rep(util=low, cores=1.1), rep(util=low, cores=1.1), rep(util=high, cores=1.1)]) == ["host-bound"]


def test_a_clock_cap_on_either_side_is_named_with_its_side():
    t = THRESHOLDS
    assert "clock-capped" not in names([rep(slowed=t.slowed_share - 0.01)])
    capped = causes([rep()], [rep(slowed=t.slowed_share, mhz=1700)], [], None,
                    {"window": {"gpus": [{"reasons_seen": ["gpu_idle", "sw_power_cap"]}]}})
    c = next(c for c in capped if c.word == "clock-capped")
    assert "(baseline side)" in c.sentence and "1,700 MHz" in c.sentence and "sw_power_cap" in c.sentence
    assert "gpu_idle" not in c.sentence


def test_steal_in_any_repeat_of_either_side():
    t = THRESHOLDS
    assert "steal" not in names([rep(steal=t.steal_share / 2)], [rep()])
    assert "steal" in names([rep()], [rep(), rep(steal=t.steal_share)])


def test_differing_settings_make_a_point_unlike():
    out = causes([rep()], [rep()], ["+ --no-enable-prefix-caching"])
    assert [c.word for c in out] == ["GPU-bound", "unlike"]
    assert "+ --no-enable-prefix-caching" in out[1].sentence


def test_other_gpu_and_other_host():
    h = {"hostname": "a", "cpu_model": "X", "cores": 16}
    same = {"gpu": "H100", "host": h}
    assert names([rep()], [rep()], (), same, dict(same)) == ["GPU-bound"]
    assert names([rep()], [rep()], (), same, {"gpu": "H200", "host": {**h, "hostname": "b"}})[-2:] == \
        ["other-GPU", "other-host"]
    assert names([rep()], [rep()], (), same, None) == ["GPU-bound"]  # unrecorded: nothing claimed


def test_thresholds_are_one_object_and_the_legend_says_them():
    t = Thresholds(gpu_busy_pct=80.0)
    assert names([rep(util=85, cores=1.0)], t=t) == ["GPU-bound"]
    assert "80 %" in legend(t)["GPU-bound"] and "95 %" in legend()["GPU-bound"]
    assert words([]) == "–"


def test_the_rows_are_the_machine_modules_compact_rows():
    """The keys read here are the ones launcher.runtime.machine.compact writes into repeats.json."""
    row = machine.compact({"gpus": [{"util_pct": {"median": 100.0}, "sm_mhz": {"median": 1980.0},
                                      "slowed_share": 0.0}], "cpu_steal_share": 0.0, "engine_cores": 0.5})
    assert names([row]) == ["GPU-bound"]


def test_two_guests_of_one_kind_are_told_apart_by_boot_and_gpu():
    """Hostname, CPU model and cores alike (two KVM guests "vm" of 16 Xeon cores): the boot id and
    the GPUs' uuids say whether the baseline ran on the same machine."""
    h = {"hostname": "vm", "cpu_model": "Intel(R) Xeon(R) Processor", "cores": 16}
    m1 = {"gpu": "H100", "host": {**h, "boot_id": "30a59545-aaaa"}, "gpu_uuids": ["GPU-641e43a7-1111"]}
    m4 = {"gpu": "H100", "host": {**h, "boot_id": "9e2093bb-bbbb"}, "gpu_uuids": ["GPU-20590ea1-2222"]}
    got = causes([rep()], [rep()], (), m1, m4)
    assert [c.word for c in got][-1] == "other-machine"
    assert "boot 30a59545 GPU-641e43a7" in got[-1].sentence and "boot 9e2093bb GPU-20590ea1" in got[-1].sentence
    assert names([rep()], [rep()], (), m1, dict(m1)) == ["GPU-bound"]
    no_uuids = {k: v for k, v in m4.items() if k != "gpu_uuids"}  # recorded before the uuids: the boot id tells
    assert names([rep()], [rep()], (), m1, no_uuids)[-1] == "other-machine"
    same_boot = {**m1, "gpu_uuids": []}
    assert names([rep()], [rep()], (), m1, same_boot) == ["GPU-bound"]  # nothing recorded differs
