"""The one reader: a result folder (ours, or specdec_bench's own) as a typed view."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.results.layout import (ACCEPTANCE_FILE, COMPLETE_FILE, CONFIGURATION_FILE, EXTENSION_KEY,
                                     TIMING_FILE)
from launcher.results.store import ResultFileError, load_json, read_last
from launcher.engines.forced_acceptance import forced_from_speculative_config


def _num(x) -> Optional[float]:
    """A statistic value: specdec_bench writes strings ("0.0219"), older files floats."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def stat(doc: dict, name: str, which: str = "median") -> Optional[float]:
    """One figure of a timing statistic: min/max/mean/std, or median/p25/p75."""
    s = doc.get(name)
    if not isinstance(s, dict):
        return None
    q = {"median": "0.5", "p50": "0.5", "p25": "0.25", "p75": "0.75"}.get(which)
    if q is not None:
        qs = s.get("quantiles")
        if isinstance(qs, dict):
            return _num(qs.get(q))
        return _num(s.get({"0.5": "p50", "0.25": "p25", "0.75": "p75"}[q]))  # pre-list layout
    return _num(s.get(which))


@dataclass
class PointResult:
    """One point's files, read. ``ours`` is False for a specdec_bench folder."""

    path: Path
    acceptance: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    configuration: dict = field(default_factory=dict)
    complete: bool = False
    ours: bool = True
    errors: list = field(default_factory=list)  # files that exist but cannot be read

    # -- extension areas
    @property
    def legacy(self) -> bool:
        """Files of the earlier layout (one object, our figures at the top level, ms)."""
        return bool(self.timing) and EXTENSION_KEY not in self.timing and "total_output_tokens" in self.timing

    @property
    def acc_ext(self) -> dict:
        if EXTENSION_KEY not in self.acceptance and "Server_AL" in self.acceptance:
            return self.acceptance  # earlier layout
        return self.acceptance.get(EXTENSION_KEY) or {}

    @property
    def tim_ext(self) -> dict:
        if self.legacy:
            ext = dict(self.timing)
            ext.setdefault("num_turns", self.timing.get("num_requests"))
            return ext
        return self.timing.get(EXTENSION_KEY) or {}

    @property
    def conf_ext(self) -> dict:
        return self.configuration.get(EXTENSION_KEY) or {}

    # -- figures
    @property
    def average_al(self) -> Optional[float]:
        return _num(self.acceptance.get("Average_AL"))

    @property
    def server_al(self) -> Optional[float]:
        return _num(self.acc_ext.get("Server_AL"))

    @property
    def prometheus_al(self) -> Optional[float]:
        return _num(self.acc_ext.get("Prometheus_AL"))

    @property
    def per_position_rates(self) -> Optional[list]:
        """vLLM's per-position acceptance (accepted at position i / drafts), pooled."""
        pp = self.acc_ext.get("per_position")
        return list(pp["rates"]) if isinstance(pp, dict) and isinstance(pp.get("rates"), list) else None

    @property
    def forced_acceptance(self) -> Optional[dict]:
        """What the server forced the acceptance to (vLLM's synthetic sampling), or None."""
        return self.conf_ext.get("forced_acceptance") or \
            forced_from_speculative_config(self.conf_ext.get("speculative_config"))

    @property
    def output_tps(self) -> Optional[float]:
        return _num(self.timing.get("Output TPS"))

    @property
    def output_tps_per_gpu(self) -> Optional[float]:
        return _num(self.timing.get("Output TPS/gpu"))

    @property
    def ttft_median_s(self) -> Optional[float]:
        v = stat(self.timing, "TTFT Time")
        return v / 1e3 if v is not None and self.legacy else v  # the earlier layout was in ms

    @property
    def decode_tps_median(self) -> Optional[float]:
        return stat(self.timing, "Request Generation Tokens Per Second")

    def count(self, statistic: str) -> Optional[int]:
        c = (self.tim_ext.get("counts") or {}).get(statistic)
        return c if isinstance(c, int) else None

    @property
    def succeeded_turns(self) -> Optional[int]:
        """Successful requests (AIPerf counts a turn as a request)."""
        n = self.tim_ext.get("num_turns")
        if isinstance(n, int):
            return n
        return self.count("Number of Output Tokens") or self.num_requests

    @property
    def num_turns(self) -> Optional[int]:
        """Turns attempted (successful + failed), the population of the timing statistics."""
        n = self.tim_ext.get("num_turns")
        if isinstance(n, int):
            return n + self.failed_requests
        return self.count("Number of Output Tokens")

    @property
    def num_requests(self) -> Optional[int]:
        """Successful requests (ours), or the requests specdec_bench ran (all succeed or it stops)."""
        n = self.tim_ext.get("num_requests")
        if isinstance(n, int):
            return n
        ral = self.acceptance.get("Request_AL")
        return len(ral) if isinstance(ral, dict) else None

    @property
    def failed_requests(self) -> int:
        f = self.tim_ext.get("failed_requests")
        return f if isinstance(f, int) else 0

    @property
    def total_output_tokens(self) -> Optional[float]:
        t = self.tim_ext.get("total_output_tokens")
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            return t
        n = self.timing.get("Number of Output Tokens")
        c = self.count("Number of Output Tokens")
        mean = stat(self.timing, "Number of Output Tokens", "mean")
        if isinstance(n, dict) and mean is not None:
            return mean * c if c is not None else mean  # specdec_bench: > 0 iff the mean is
        return None

    @property
    def status(self) -> Optional[str]:
        return self.tim_ext.get("status")

    @property
    def reason(self) -> Optional[str]:
        return self.tim_ext.get("reason")

    @property
    def speculative(self) -> bool:
        v = self.acc_ext.get("speculative")
        if isinstance(v, bool):
            return v
        alg = self.configuration.get("speculative_algorithm")
        return alg not in ("NONE", None) if self.configuration else bool(self.acceptance)


def read_point(point_dir) -> PointResult:
    """Read a point folder: our layout (COMPLETE marker, extension keys) or
    specdec_bench's (no marker: complete when its metric files are there)."""
    p = Path(point_dir)
    res = PointResult(path=p)
    for name, attr, reader in ((ACCEPTANCE_FILE, "acceptance", read_last), (TIMING_FILE, "timing", read_last),
                               (CONFIGURATION_FILE, "configuration", load_json)):
        f = p / name
        if not f.exists():
            continue
        try:
            doc = reader(f)
        except ResultFileError as e:
            res.errors.append(str(e) if str(e).startswith(name) else f"{name}: {str(e).split(': ', 1)[-1]}")
            continue
        if not isinstance(doc, dict):
            res.errors.append(f"{name}: top level must be a JSON object, found {type(doc).__name__}")
            continue
        setattr(res, attr, doc)
    res.ours = EXTENSION_KEY in res.timing or EXTENSION_KEY in res.configuration or (p / COMPLETE_FILE).exists()
    if res.ours:
        res.complete = (p / COMPLETE_FILE).is_file()
    else:
        res.complete = bool(res.timing) and bool(res.acceptance) and not res.errors
    return res
