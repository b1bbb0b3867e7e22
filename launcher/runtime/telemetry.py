"""GPU memory telemetry for one benchmark job, read through NVML (pynvml).

A background daemon thread samples the used memory of each visible NVIDIA GPU
every ``interval_s`` seconds for as long as the job runs, and the result is
written as ``gpu_telemetry.json`` in the job's folder (see
docs/results-layout.md)::

    with GpuMemorySampler(interval_s=0.5, kv_cache_cap_bytes=cap) as sampler:
        run_the_job()
    sampler.write_report(JobPaths(job_dir).gpu_telemetry)  # TELEMETRY_FILE

The report (``GpuMemorySampler.report()``) is a plain, JSON-ready dict::

    {
      "available": bool,            # false: no NVML / no driver / no GPU visible
      "reason": str | null,         # why not available (null when available)
      "driver_version": str | null,
      "nvml_version": str | null,
      "visible_devices": str | null,   # CUDA_VISIBLE_DEVICES as seen at start
      "gpus": [{"index": int,          # NVML index
                "name": str, "uuid": str,
                "total_gib": float,
                "baseline_used_gib": float,   # first sample, taken at start()
                "peak_used_gib": float,       # max over all samples
                "peak_increase_gib": float}], # peak - baseline: the job's own rise
      "peak_total_gib": float | null,      # max over samples of the sum over GPUs
      "sum_of_peaks_gib": float | null,    # sum of the per-GPU peaks (>= the above)
      "baseline_total_gib": float | null,
      "samples": int, "sample_errors": int, "interval_s": float,
      "duration_s": float,
      "memory_info_version": "v2" | "v1" | null,
      "kv_cache_cap_set": bool, "kv_cache_cap_bytes": int | null,
      "kv_cache_cap_gib": float | null
    }

Memory figures are GiB (2**30 bytes), rounded to 4 decimals (0.1 MiB). "used"
is NVML's device-wide figure: it counts every process on the GPU (and, with the
v1 query, memory the driver reserves), so ``baseline_used_gib`` is what was
already in use before the job started and ``peak_increase_gib`` what the job
added on top. The v2 query (``nvmlDeviceGetMemoryInfo_v2``, what recent
nvidia-smi shows) is tried first and the v1 one used if the driver lacks it.

Without NVIDIA GPUs (pynvml not installed, NVML library or driver missing,
``nvmlInit`` failing, no device, CUDA_VISIBLE_DEVICES hiding all of them) the
report says ``"available": false`` with the reason, and nothing raises: the job
carries on. Errors while sampling are counted (``sample_errors``), not raised.

CUDA_VISIBLE_DEVICES: when it lists integer indices, only those GPUs are
sampled. The indices are taken as NVML indices, which follow the PCI bus
order; CUDA's default order ("FASTEST_FIRST") matches that on the usual
homogeneous nodes; set CUDA_DEVICE_ORDER=PCI_BUS_ID to be sure. Full GPU UUIDs
("GPU-xxxxxxxx-...") are resolved through NVML as well. Anything else (MIG
ids, UUID prefixes) cannot be mapped here, so every GPU is sampled and the
report's ``visible_devices_note`` says so. As in CUDA, the list ends at the
first entry that is not valid (e.g. "-1"); an empty value hides every GPU.

``gpu_names()`` gives the GPU field of configuration.json: the distinct names
of the visible GPUs in index order, joined with ", " (e.g. "NVIDIA H200"; the
GPU count is recorded elsewhere, as num_gpus), or ``"cpu"`` when no NVIDIA GPU
can be seen.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Optional

from launcher.runtime.files import write_json_atomic

TELEMETRY_FILE = "gpu_telemetry.json"
GIB = 1 << 30
NO_GPU_LABEL = "cpu"

__all__ = [
    "GIB",
    "NO_GPU_LABEL",
    "GpuMemorySampler",
    "gpu_names",
    "gpu_uuids",
    "gpu_name_list",
    "visible_handles",
]


def _real_nvml() -> Any:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        import pynvml  # type: ignore[import-not-found]  # lazy: optional (nvidia-ml-py); a CPU host has none
    except Exception:  # ImportError, or a broken install
        return None
    return pynvml


def _gib(nbytes: float) -> float:
    return round(nbytes / GIB, 4)


def _text(value: Any) -> str:
    """NVML strings are bytes in old pynvml releases and str in new ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _nvml_error_types(nvml: Any) -> tuple[type[BaseException], ...]:
    err = getattr(nvml, "NVMLError", None)
    if isinstance(err, type) and issubclass(err, BaseException):
        return (err, OSError)
    return (OSError,)


def _parse_visible_devices(value: str | None) -> tuple[list[int] | list[str] | None, str | None]:
    """Read CUDA_VISIBLE_DEVICES.

    Returns (selection, note): selection is None for "all GPUs", a list of
    integer indices, or a list of full "GPU-" UUIDs; note explains a value
    that could not be honoured.
    """
    if value is None:
        return None, None
    entries = [e.strip() for e in value.split(",")]
    if entries == [""]:
        return [], None  # set but empty: CUDA sees no device
    indices: list[int] = []
    uuids: list[str] = []
    for entry in entries:
        if entry.lstrip("-").isdigit():
            idx = int(entry)
            if idx < 0:
                break  # CUDA stops at the first invalid entry
            indices.append(idx)
        elif entry.startswith("GPU-") and len(entry) == 40:
            uuids.append(entry)
        else:
            return None, (
                f"CUDA_VISIBLE_DEVICES={value!r} has entries that cannot be mapped "
                "to NVML devices here (MIG id or UUID prefix); sampling every GPU"
            )
    if indices and uuids:
        return None, (
            f"CUDA_VISIBLE_DEVICES={value!r} mixes indices and UUIDs; sampling every GPU"
        )
    return (uuids if uuids else indices), None


class GpuMemorySampler:
    """Samples per-GPU used memory in a background thread.

    Use it as a context manager, or call ``start()`` and ``stop()``. Both are
    safe to call on a machine without NVIDIA GPUs and never raise because of
    NVML; ``report()`` then says ``available: false`` and why.

    ``nvml`` is the NVML binding to use (the pynvml module by default); tests
    pass a fake object with the same functions. ``visible_devices`` overrides
    CUDA_VISIBLE_DEVICES (pass the string as the variable would hold it).
    """

    def __init__(
        self,
        interval_s: float = 0.5,
        kv_cache_cap_bytes: int | None = None,
        *,
        nvml: Any = None,
        visible_devices: str | None = ...,  # type: ignore[assignment]
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = float(interval_s)
        self.kv_cache_cap_bytes = None if kv_cache_cap_bytes is None else int(kv_cache_cap_bytes)
        self._nvml = nvml if nvml is not None else _real_nvml()
        if visible_devices is ...:
            visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        self._visible_devices: str | None = visible_devices

        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._initialised = False  # nvmlInit succeeded and not yet shut down
        self._started = False
        self._stopped = False

        self._available = False
        self._reason: str | None = "sampler not started"
        self._driver_version: str | None = None
        self._nvml_version: str | None = None
        self._visible_note: str | None = None
        self._mem_version: str | None = None
        self._handles: list[Any] = []
        self._gpus: list[dict[str, Any]] = []  # index, name, uuid, total bytes
        self._baseline: list[int] | None = None
        self._peak: list[int] = []
        self._peak_total: int | None = None
        self._samples = 0
        self._sample_errors = 0
        self._t_start: float | None = None
        self._t_stop: float | None = None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> "GpuMemorySampler":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "GpuMemorySampler":
        """Open NVML, take the baseline sample now, then sample in the background."""
        if self._started:
            return self
        self._started = True
        self._t_start = time.monotonic()
        try:
            self._open()
        except Exception as exc:  # never let telemetry break the job
            self._available = False
            self._reason = f"telemetry setup failed: {type(exc).__name__}: {exc}"
            self._shutdown()
            return self
        if not self._available:
            self._shutdown()
            return self
        self._sample()  # baseline, before the job does anything
        self._thread = threading.Thread(
            target=self._run, name="gpu-memory-sampler", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> "GpuMemorySampler":
        """Stop the thread, take a last sample and close NVML. Idempotent."""
        if not self._started or self._stopped:
            return self
        self._stopped = True
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 4 * self.interval_s))
        if self._available:
            self._sample()
        self._t_stop = time.monotonic()
        self._shutdown()
        return self

    # -- NVML access -------------------------------------------------------

    def _open(self) -> None:
        nvml = self._nvml
        if nvml is None:
            self._reason = "pynvml (nvidia-ml-py) is not installed"
            return
        errors = _nvml_error_types(nvml)
        try:
            nvml.nvmlInit()
        except errors as exc:
            self._reason = f"NVML unavailable (no NVIDIA driver?): {exc}"
            return
        self._initialised = True
        try:
            self._driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        except errors:
            self._driver_version = None
        try:
            self._nvml_version = _text(nvml.nvmlSystemGetNVMLVersion())
        except (AttributeError, *errors):
            self._nvml_version = None
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except errors as exc:
            self._reason = f"nvmlDeviceGetCount failed: {exc}"
            return
        if count == 0:
            self._reason = "NVML found no NVIDIA GPU"
            return

        selection, self._visible_note = _parse_visible_devices(self._visible_devices)
        handles = _visible_handles(nvml, errors, count, selection)
        if not handles:
            self._reason = (
                f"CUDA_VISIBLE_DEVICES={self._visible_devices!r} leaves no NVIDIA GPU "
                f"visible (NVML sees {count})"
            )
            return

        self._mem_version = "v2" if getattr(nvml, "nvmlMemory_v2", None) else "v1"
        for idx, h in handles:
            try:
                name = _text(nvml.nvmlDeviceGetName(h))
            except errors:
                name = "unknown"
            try:
                uuid = _text(nvml.nvmlDeviceGetUUID(h))
            except errors:
                uuid = None
            total = int(self._memory_info(h).total)
            self._handles.append(h)
            self._gpus.append({"index": idx, "name": name, "uuid": uuid, "total": total})
        self._peak = [0] * len(self._handles)
        self._available = True
        self._reason = None

    def _memory_info(self, handle: Any) -> Any:
        nvml = self._nvml
        if self._mem_version == "v2":
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
            except _nvml_error_types(nvml) + (TypeError, AttributeError):
                self._mem_version = "v1"  # driver (or binding) without the v2 query
        return nvml.nvmlDeviceGetMemoryInfo(handle)

    def _sample(self) -> None:
        try:
            used = [int(self._memory_info(h).used) for h in self._handles]
        except Exception:
            with self._lock:
                self._sample_errors += 1
            return
        total = sum(used)
        with self._lock:
            if self._baseline is None:
                self._baseline = list(used)
            self._peak = [max(p, u) for p, u in zip(self._peak, used)]
            self._peak_total = total if self._peak_total is None else max(self._peak_total, total)
            self._samples += 1

    def _run(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            self._sample()

    def _shutdown(self) -> None:
        if self._initialised:
            self._initialised = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    # -- results -----------------------------------------------------------

    def current_used_bytes(self) -> list[int] | None:
        """One immediate reading of used bytes per sampled GPU (None if unavailable).

        It is not counted as a sample. Only meaningful between start() and stop().
        """
        if not self._available or not self._initialised:
            return None
        try:
            return [int(self._memory_info(h).used) for h in self._handles]
        except Exception:
            return None

    def report(self) -> dict[str, Any]:
        """The telemetry so far (or final, after stop()) as a JSON-ready dict."""
        with self._lock:
            baseline = list(self._baseline) if self._baseline is not None else None
            peak = list(self._peak)
            peak_total = self._peak_total
            samples = self._samples
            sample_errors = self._sample_errors
        available = self._available and samples > 0
        reason = self._reason
        if self._available and samples == 0:
            reason = "NVML opened but every memory query failed"
        gpus = _gpu_rows(self._gpus, baseline, peak, samples) if self._available else []
        end = self._t_stop if self._t_stop is not None else time.monotonic()
        duration = round(end - self._t_start, 3) if self._t_start is not None else 0.0
        cap = self.kv_cache_cap_bytes
        out: dict[str, Any] = {
            "available": available,
            "reason": None if available else reason,
            "driver_version": self._driver_version,
            "nvml_version": self._nvml_version,
            "visible_devices": self._visible_devices,
            "gpus": gpus,
            "peak_total_gib": _gib(peak_total) if available and peak_total is not None else None,
            "sum_of_peaks_gib": _gib(sum(peak)) if available else None,
            "baseline_total_gib": _gib(sum(baseline)) if available and baseline else None,
            "samples": samples,
            "sample_errors": sample_errors,
            "interval_s": self.interval_s,
            "duration_s": duration,
            "memory_info_version": self._mem_version if self._available else None,
            "kv_cache_cap_set": cap is not None,
            "kv_cache_cap_bytes": cap,
            "kv_cache_cap_gib": None if cap is None else _gib(cap),
        }
        if self._visible_note:
            out["visible_devices_note"] = self._visible_note
        return out

    def write_report(self, path: str | os.PathLike[str]) -> Path:
        """Write report() as JSON to ``path`` (atomically; parent folders made). Returns the path."""
        return write_json_atomic(path, self.report(), indent=2)


def _visible_handles(nvml: Any, errors: tuple, count: int, selection) -> list[tuple[int, Any]]:
    """(index, handle) of each GPU the process sees: all (``selection`` None), the UUIDs
    listed, or the indices listed (CUDA ignores the rest of the list after an invalid one)."""
    if selection is None:
        return [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    handles: list[tuple[int, Any]] = []
    if selection and isinstance(selection[0], str):
        for uuid in selection:
            try:
                h = nvml.nvmlDeviceGetHandleByUUID(uuid)
                handles.append((int(nvml.nvmlDeviceGetIndex(h)), h))
            except (AttributeError, *errors):
                continue
        return handles
    for idx in selection:
        if not 0 <= idx < count:
            break
        handles.append((idx, nvml.nvmlDeviceGetHandleByIndex(idx)))
    return handles


def visible_handles(nvml: Any, visible_devices: str | None = ...) -> list[Any]:  # type: ignore[assignment]
    """The NVML handles of the GPUs this process sees, in CUDA_VISIBLE_DEVICES' order as
    :class:`GpuMemorySampler` reads it (every GPU when it is unset or cannot be mapped); NVML
    must be initialised. The machine sampler's GPUs (launcher.runtime.machine)."""
    if visible_devices is ...:
        visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    selection, _ = _parse_visible_devices(visible_devices)
    count = int(nvml.nvmlDeviceGetCount())
    return [h for _, h in _visible_handles(nvml, _nvml_error_types(nvml), count, selection)]


def _gpu_rows(gpus: list[dict], baseline: Optional[list], peak: list, samples: int) -> list[dict]:
    """The report's row of each GPU: total, baseline, peak and its increase, in GiB."""
    rows = []
    for i, g in enumerate(gpus):
        base_b = baseline[i] if baseline else None
        peak_b = peak[i] if samples else None
        rows.append({"index": g["index"], "name": g["name"], "uuid": g["uuid"], "total_gib": _gib(g["total"]),
                     "baseline_used_gib": None if base_b is None else _gib(base_b),
                     "peak_used_gib": None if peak_b is None else _gib(peak_b),
                     "peak_increase_gib": None if base_b is None or peak_b is None else _gib(peak_b - base_b)})
    return rows


def gpu_name_list(*, nvml: Any = None, visible_devices: str | None = ...) -> list[str]:  # type: ignore[assignment]
    """Names of the visible NVIDIA GPUs in NVML index order; [] when there are none."""
    sampler = GpuMemorySampler(nvml=nvml, visible_devices=visible_devices)
    try:
        sampler._open()
        return [g["name"] for g in sampler._gpus] if sampler._available else []
    except Exception:
        return []
    finally:
        sampler._shutdown()


def gpu_uuids(*, nvml: Any = None, visible_devices: str | None = ...) -> list[str]:  # type: ignore[assignment]
    """UUIDs of the visible NVIDIA GPUs in NVML index order ("GPU-7c41ac40-..."); [] when there are none
    or NVML gives none: what tells two machines of one GPU model apart."""
    sampler = GpuMemorySampler(nvml=nvml, visible_devices=visible_devices)
    try:
        sampler._open()
        return [g["uuid"] for g in sampler._gpus if g.get("uuid")] if sampler._available else []
    except Exception:
        return []
    finally:
        sampler._shutdown()


def gpu_names(*, nvml: Any = None, visible_devices: str | None = ...) -> str:  # type: ignore[assignment]
    """The GPU field of configuration.json.

    The distinct names of the visible GPUs, in index order, joined with ", "
    ("NVIDIA H200" on a node of eight H200s: the count is num_gpus elsewhere),
    or ``"cpu"`` (NO_GPU_LABEL) when no NVIDIA GPU can be seen. Never raises.
    """
    names = gpu_name_list(nvml=nvml, visible_devices=visible_devices)
    if not names:
        return NO_GPU_LABEL
    return ", ".join(dict.fromkeys(names))
