"""All checks a run must pass before any byte of it is sent."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from upload.destination import MAX_KEY_BYTES
from upload.discovery import LocalRun
from upload.provenance import provenance_problems
from upload.resultfiles import parse_result_files
from upload.secretscan import find_secrets
from upload.validity_gate import DEFAULT_MAX_FAILED_FRACTION, gate_problems


@dataclass(frozen=True)
class Policy:
    allow_incomplete_provenance: bool = False
    allow_invalid: bool = False
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION
    environment: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def check_run(run: LocalRun, policy: Policy, key_prefix: str) -> list[str]:
    """Every reason to refuse the run, one line each; empty when it may go."""
    parsed = parse_result_files(run)
    reasons = list(parsed.problems)
    config = parsed.docs.get("configuration.json")
    if config is None and run.file("configuration.json") is None:
        reasons.append(
            "configuration.json missing: the run has no provenance record; "
            "rerun it with the benchmark that writes one"
        )
    if config is not None:
        if not policy.allow_incomplete_provenance:
            reasons += provenance_problems(config)
        reasons += find_secrets(config, policy.environment)
    if not policy.allow_invalid:
        unparsed = {f for f in ("timing.json", "acceptance_rate.json", "configuration.json")
                    if run.file(f) and f not in parsed.docs}
        if not unparsed:  # a file that did not parse is already a reason
            reasons += gate_problems(run.root, policy.max_failed_fraction)
    for f in run.files:
        key = f"{key_prefix}/{f.rel}"
        if len(key.encode("utf-8")) > MAX_KEY_BYTES:
            reasons.append(f"{f.rel}: its S3 key would exceed {MAX_KEY_BYTES} bytes; shorten the prefix or the path")
            break
    return reasons
