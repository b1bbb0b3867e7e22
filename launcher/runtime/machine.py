"""What decides a figure besides the model: the GPU's clocks, power and throttling, the
host's CPU and how busy it was, and the engine's own CPU time, sampled over a job and
summarised over each point's requests (issue 37: the same run gave 1.0-1.3x on one GPU
machine and 1.54-1.78x on another).

The node samples (:class:`MachineSampler`, a daemon thread) every ``interval_s`` into
``<job>/logs/machine_samples.jsonl`` (``JobPaths.machine_samples``, launcher.contracts.job_paths),
one JSON object a line::

    {"t": wall-clock s,
     "gpus": [{"sm_mhz", "util_pct", "power_w", "temp_c", "reasons": bitmask,
               "energy_mj": the GPU's energy counter | null}] | [],   # the GPUs this process sees
     "cpu": [user, nice, system, idle, iowait, irq, softirq, steal] jiffies (/proc/stat) | null,
     "load1": float | null, "engine_cpu_s": user+system s of the engine's processes | null}

The benchmark summarises the samples inside a point's window (:func:`window_summary`) into
the point's ``configuration.json`` (``machine``), beside :func:`host_facts`; each GPU's energy over
the window comes from its counter (launcher.runtime.energy). Every reader
here is best-effort: a host without NVML, /proc or psutil gives nulls, never an error.
Standard library only; pynvml and psutil are imported lazily (optional on the node).
"""
from __future__ import annotations

import functools
import json
import os
import platform
import threading
import time
import timeit
from pathlib import Path
from statistics import median
from typing import Any, Callable, Iterable, Optional

from launcher.runtime.energy import window_energy
from launcher.runtime.telemetry import visible_handles

SAMPLES_FILE = "machine_samples.jsonl"

# NVML's clock-event (throttle) reasons, as nvidia-smi names them (nvml.h: nvmlClocksEventReason*).
REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
# Reasons that lower the clock below what the work asks for (idle and sync boost do not).
SLOWING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def reason_names(mask: int) -> list[str]:
    """The names of the bits set in an NVML clock-event mask. Pure."""
    return [name for bit, name in REASONS.items() if mask & bit] + (
        [f"0x{mask & ~sum(REASONS):x}"] if mask & ~sum(REASONS) else [])


def cpu_model(cpuinfo: Optional[str] = None) -> Optional[str]:
    """The CPU's model name (/proc/cpuinfo's first "model name"), else platform's."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or None


# One host core's speed, the same loop on every machine (tests/gpu/run_gpu_8b.sh's facts stage too):
# a draft-model step is bound by one core (docs/gpu.md), and a KVM guest often names its CPU
# only "Intel(R) Xeon(R) Processor", so two hosts compare by this figure, not by the name.
ONE_CORE_LOOP = "s = 0\nfor i in range(2000000): s += i"
ONE_CORE_WORDS = "ms for 2e6 Python additions, best of 5"


@functools.lru_cache(maxsize=1)
def one_core_ms() -> float:
    """ms of :data:`ONE_CORE_LOOP`, the best of 5 runs (about 0.3 s once per process)."""
    return round(min(timeit.repeat(ONE_CORE_LOOP, number=1, repeat=5)) * 1000, 1)


def host_facts() -> dict:
    """The host a figure was measured on: CPU model, logical cores, the cores this process
    may use, the kernel, the host name, the boot id and one core's speed (:func:`one_core_ms`)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    return {"cpu_model": cpu_model(), "cores": os.cpu_count(), "usable_cores": usable,
            "kernel": platform.release(), "hostname": platform.node(), "boot_id": boot_id(),
            "one_core_ms": one_core_ms()}


def boot_id() -> Optional[str]:
    """This boot of the host (the kernel's random boot id): two leases of machines that share a
    host name ("vm") still differ here, so results can say whether they came from one machine."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def read_cpu_jiffies(text: Optional[str] = None) -> Optional[list[int]]:
    """The aggregate ``cpu`` line of /proc/stat (CPU_FIELDS), or None."""
    if text is None:
        try:
            text = Path("/proc/stat").read_text()
        except OSError:
            return None
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            vals = [int(v) for v in parts[1:1 + len(CPU_FIELDS)]]
            return vals + [0] * (len(CPU_FIELDS) - len(vals))
    return None


def _load1() -> Optional[float]:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def tree_cpu_seconds(pids: Iterable[int]) -> Optional[float]:
    """User + system CPU seconds of the processes ``pids`` and all their descendants (psutil),
    or None without psutil or when none can be read."""
    try:
        import psutil  # lazy: optional on the node (every vLLM install has it)
    except ImportError:
        return None
    seen: set[int] = set()
    total, found = 0.0, False
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except (psutil.Error, OSError):
            continue
        for p in procs:
            if p.pid in seen:
                continue
            seen.add(p.pid)
            try:
                t = p.cpu_times()
            except (psutil.Error, OSError):
                continue
            total += t.user + t.system
            found = True
    return round(total, 3) if found else None


def _nvml() -> Any:
    try:
        import pynvml  # lazy: optional (nvidia-ml-py); a CPU host has none
    except Exception:
        return None
    return pynvml


class MachineSampler:
    """Samples the GPUs' clocks, utilisation, power and clock-event reasons, the host's CPU
    jiffies and load, and the engine's CPU time, into a JSON-lines file. Never raises:
    telemetry must not break the job. ``engine_pids`` gives the engine's root processes now
    (they change when the server restarts); ``nvml`` is pynvml or a test's fake."""

    def __init__(self, path: str | os.PathLike, interval_s: float = 0.5,
                 engine_pids: Callable[[], Iterable[int]] = lambda: (), nvml: Any = ...):
        self.path = Path(path)
        self.interval_s = float(interval_s)
        self.engine_pids = engine_pids
        self._nvml = _nvml() if nvml is ... else nvml
        self._handles: list = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.errors = 0

    def start(self) -> "MachineSampler":
        try:
            if self._nvml is not None:
                self._nvml.nvmlInit()
                self._handles = visible_handles(self._nvml)  # the job's GPUs (CUDA_VISIBLE_DEVICES)
        except Exception:  # no driver, no GPU: CPU-side samples only
            self._handles = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name="machine-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 4 * self.interval_s))
        if self._handles:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    def _gpu(self, h) -> dict:
        nv = self._nvml
        row: dict = {}
        for key, read in (("sm_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                          ("util_pct", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu),
                          ("power_w", lambda: round(nv.nvmlDeviceGetPowerUsage(h) / 1000.0, 1)),
                          ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                          ("reasons", lambda: self._reasons(h)),
                          ("energy_mj", lambda: int(nv.nvmlDeviceGetTotalEnergyConsumption(h)))):
            try:
                row[key] = read()
            except Exception:
                row[key] = None
        return row

    def _reasons(self, h) -> Optional[int]:
        nv = self._nvml
        fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        return int(fn(h)) if fn is not None else None

    def sample(self) -> dict:
        try:
            engine = tree_cpu_seconds(list(self.engine_pids()))
        except Exception:
            engine = None
        return {"t": round(time.time(), 3), "gpus": [self._gpu(h) for h in self._handles],
                "cpu": read_cpu_jiffies(), "load1": _load1(), "engine_cpu_s": engine}

    def _run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            while True:
                try:
                    f.write(json.dumps(self.sample(), separators=(",", ":")) + "\n")
                    f.flush()
                except Exception:
                    self.errors += 1
                if self._stop.wait(self.interval_s):
                    return


def read_samples(path: str | os.PathLike) -> list[dict]:
    """The samples of a job (a torn last line is skipped)."""
    out = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and isinstance(d.get("t"), (int, float)):
            out.append(d)
    return out


def _stats(xs: list[float]) -> Optional[dict]:
    xs = [float(x) for x in xs if isinstance(x, (int, float))]
    if not xs:
        return None
    return {"min": round(min(xs), 2), "median": round(median(xs), 2), "max": round(max(xs), 2)}


def window_summary(samples: list[dict], t0: float, t1: float) -> dict:
    """The machine over [t0, t1] (wall-clock seconds): per GPU the SM clock, utilisation and
    power (min / median / max), the clock-event reasons seen (and the share of samples with
    one that slows the clock), the host's CPU busy and steal shares, the highest 1-minute
    load, and the engine's CPU seconds (and cores' worth) over the window. Pure."""
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    out: dict = {"samples": len(inside), "window_s": round(t1 - t0, 3)}
    n_gpus = max((len(s.get("gpus") or []) for s in inside), default=0)
    gpus = []
    for i in range(n_gpus):
        rows = [s["gpus"][i] for s in inside if len(s.get("gpus") or []) > i]
        masks = [r.get("reasons") for r in rows if isinstance(r.get("reasons"), int)]
        seen = 0
        for m in masks:
            seen |= m
        energy = window_energy([(s["t"], s["gpus"][i].get("energy_mj")) for s in samples
                                if len(s.get("gpus") or []) > i], t0, t1)
        gpus.append({"sm_mhz": _stats([r.get("sm_mhz") for r in rows]),
                     "util_pct": _stats([r.get("util_pct") for r in rows]),
                     "power_w": _stats([r.get("power_w") for r in rows]),
                     "temp_c": _stats([r.get("temp_c") for r in rows]),
                     "reasons_seen": reason_names(seen) if masks else None,
                     "slowed_share": round(sum(1 for m in masks if m & SLOWING) / len(masks), 3) if masks else None,
                     "energy_j": energy and energy["energy_j"],
                     "energy_covered_share": energy and energy["covered_share"]})
    out["gpus"] = gpus
    # CPU shares from the jiffies just before and at the end of the window
    # (a window too short for the sampler, or one it missed under load, closes on the first
    # sample after it: the span then reaches at most one sampling period past the window)
    before = [s for s in samples if s["t"] <= t0 and s.get("cpu")]
    after = [s for s in samples if s["t"] > t1]
    cpu = [s for s in inside if s.get("cpu")]
    first = before[-1] if before else (cpu[0] if cpu else None)
    last = cpu[-1] if cpu and cpu[-1] is not first else next((s for s in after if s.get("cpu")), None)
    busy = steal = None
    if first is not None and last is not None and last is not first:
        d = [b - a for a, b in zip(first["cpu"], last["cpu"])]
        total = sum(d)
        if total > 0:
            idle = d[CPU_FIELDS.index("idle")] + d[CPU_FIELDS.index("iowait")]
            busy = round(1 - idle / total, 3)
            steal = round(d[CPU_FIELDS.index("steal")] / total, 4)
    out["cpu_busy_share"], out["cpu_steal_share"] = busy, steal
    loads = [s.get("load1") for s in inside if isinstance(s.get("load1"), (int, float))]
    out["load1_max"] = max(loads) if loads else None
    eng = [s for s in ([*(before[-1:] if before else [])] + inside) if isinstance(s.get("engine_cpu_s"), (int, float))]
    if len(eng) < 2:
        eng += [s for s in after if isinstance(s.get("engine_cpu_s"), (int, float))][:1]
    if len(eng) >= 2 and eng[-1]["t"] > eng[0]["t"]:
        used = eng[-1]["engine_cpu_s"] - eng[0]["engine_cpu_s"]
        out["engine_cpu_s"] = round(used, 3) if used >= 0 else None  # a restart resets the tree
        out["engine_cores"] = round(used / (eng[-1]["t"] - eng[0]["t"]), 3) if used >= 0 else None
    else:
        out["engine_cpu_s"] = out["engine_cores"] = None
    return out


def compact(window: Optional[dict]) -> Optional[dict]:
    """A window's headline for one repeat's row of repeats.json: the first GPU's median SM clock,
    utilisation and power, the share of samples with a slowing reason, the host's busy and
    steal shares and the engine's cores' worth of CPU; and every GPU's energy over the window (J, from
    its counter: ``gpu_energy_j``, None where no counter was read) with the window's length. Pure."""
    if not window:
        return None
    g = (window.get("gpus") or [None])[0] or {}
    energy = [x.get("energy_j") for x in window.get("gpus") or []]
    med = lambda k: (g.get(k) or {}).get("median")  # noqa: E731
    return {"sm_mhz": med("sm_mhz"), "util_pct": med("util_pct"), "power_w": med("power_w"),
            "slowed_share": g.get("slowed_share"), "cpu_busy_share": window.get("cpu_busy_share"),
            "cpu_steal_share": window.get("cpu_steal_share"), "load1_max": window.get("load1_max"),
            "engine_cores": window.get("engine_cores"), "samples": window.get("samples"),
            "gpu_energy_j": energy if energy and all(isinstance(e, (int, float)) for e in energy) else None,
            "window_s": window.get("window_s")}


def machines_line(machines: Iterable[Optional[dict]]) -> str:
    """Where a set of points was measured, in one line: each distinct GPU and host, the range of
    the points' median SM clocks, the slowing reasons seen and the highest steal. Pure."""
    ms = [m for m in machines if m]
    if not ms:
        return "machine not recorded"
    hosts = list(dict.fromkeys(f"{m.get('gpu') or '?'} on {(m.get('host') or {}).get('cores') or '?'} x "
                               f"{(m.get('host') or {}).get('cpu_model') or '?'}" for m in ms))
    gpus = [((m.get("window") or {}).get("gpus") or [None])[0] or {} for m in ms]
    clocks = [g["sm_mhz"]["median"] for g in gpus if g.get("sm_mhz")]
    reasons = sorted({r for g in gpus for r in (g.get("reasons_seen") or []) if r not in ("gpu_idle", "sync_boost")})
    steal = [(m.get("window") or {}).get("cpu_steal_share") for m in ms]
    steal = [s for s in steal if isinstance(s, (int, float))]
    core = [(m.get("host") or {}).get("one_core_ms") for m in ms]
    core = [c for c in core if isinstance(c, (int, float))]
    text = "; ".join(hosts)
    if core:
        text += f"; one core {min(core):g}" + (f"-{max(core):g}" if max(core) != min(core) else "") + \
            f" {ONE_CORE_WORDS}"
    if clocks:
        text += f"; SM clock {min(clocks):g}-{max(clocks):g} MHz (medians over {len(clocks)} points)"
        text += f", slowed by {'/'.join(reasons)}" if reasons else ", no slowing reason"
    if steal:
        text += f"; CPU steal up to {max(steal):.1%}"
    return text


def one_line(machine: Optional[dict]) -> str:
    """``NVIDIA H200 on 16 x Intel(R) Xeon ...; SM 1980 MHz (1755-1980), no slowing reason``."""
    if not machine:
        return "machine not recorded"
    host = machine.get("host") or {}
    text = f"{machine.get('gpu') or '?'} on {host.get('cores') or '?'} x {host.get('cpu_model') or '?'}"
    if isinstance(host.get("one_core_ms"), (int, float)):
        text += f" (one core {host['one_core_ms']:g} ms)"
    w = machine.get("window") or {}
    g = (w.get("gpus") or [None])[0]
    if g and g.get("sm_mhz"):
        sm = g["sm_mhz"]
        text += f"; SM {sm['median']:g} MHz ({sm['min']:g}-{sm['max']:g})"
        slow = [r for r in (g.get("reasons_seen") or []) if r not in ("gpu_idle", "sync_boost")]
        text += f", slowed by {'/'.join(slow)} in {g.get('slowed_share', 0):.0%} of samples" if slow \
            else ", no slowing reason"
    if w.get("cpu_busy_share") is not None:
        text += f"; host CPU {w['cpu_busy_share']:.0%} busy, steal {w.get('cpu_steal_share') or 0:.1%}"
    if w.get("engine_cores") is not None:
        text += f"; engine {w['engine_cores']:.2f} cores"
    return text
