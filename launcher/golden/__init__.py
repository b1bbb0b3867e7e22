"""Golden acceptance references and the check of a run against one (``bench.golden=<id>``).
Standard library only, pure: the node side loads the table from this checkout and judges
each matching point.

A verdict compares the run's AL (vLLM's definition: pooled 1 + accepted /
drafts over the per-request stats, or the mean of each request's when the
reference was made that way) and per-position rates (accepted at position i /
drafts) with the entry's. Each figure's tolerance is the entry's relative one or
the sampling noise of the two counts (Z standard errors over the run's drafts and
the reference's, launcher.stats.acceptance_noise), whichever is wider; a figure whose noise
alone would hide the loss of half of it is not judged ("too_small_to_judge").
Where the run and the reference were recorded (engine, version, build, CPU kernel
or GPU, dtype) is compared and the differences named. docs/golden.md.

Its modules, one job each: ``table`` (``references.json``, read once), ``verdict`` (the
check of one measurement, the job's overall verdict), ``text`` (the verdict in words),
``noise`` (the one noise tolerance). This package hands their names on.
"""
from __future__ import annotations

from launcher.golden.table import TABLE, known_ids, load_table, lookup
from launcher.golden.text import summary_line, verdict_line
from launcher.golden.verdict import (FAIL, JUDGEABLE_SHARE, LIKELY_CAUSES, NOT_COMPARABLE, PASS, PLATFORM_KEYS,
                                     STRICT_KEYS, Platform, TOO_SMALL, check, overall, platform_differences,
                                     workload_differences)

__all__ = ["TABLE", "known_ids", "load_table", "lookup", "summary_line", "verdict_line", "FAIL", "JUDGEABLE_SHARE",
           "LIKELY_CAUSES", "NOT_COMPARABLE", "PASS", "PLATFORM_KEYS", "Platform", "STRICT_KEYS", "TOO_SMALL", "check",
           "overall", "platform_differences", "workload_differences"]
