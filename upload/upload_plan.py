"""Turn discovered runs into a plan: refused runs with reasons, and for every
accepted run its digests, destination and action."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from upload.destination import Destination
from upload.discovery import Discovery, LocalFile, LocalRun
from upload.manifest import FileDigest, digest_file
from upload.remote import RemoteRun, State, assign_keys, classify, list_objects
from upload.validation import Policy, check_run


class Action(Enum):
    UPLOAD = "upload"
    RESUME = "resume"
    SKIP = "skip"


@dataclass
class Refusal:
    label: str
    reasons: list[str]


@dataclass
class RunPlan:
    run: LocalRun
    prefix: str  # key prefix of the run, no trailing slash
    digests: list[FileDigest]
    action: Action | None = None  # None until the destination has been looked at
    to_send: list[FileDigest] = field(default_factory=list)
    kept: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(d.size for d in self.digests)

    @property
    def send_bytes(self) -> int:
        return sum(d.size for d in self.to_send)


@dataclass
class Plan:
    runs: list[RunPlan]
    refused: list[Refusal]
    base_prefix: str  # prefix/<local_dir_name>

    def with_action(self, *actions: Action) -> list[RunPlan]:
        return [r for r in self.runs if r.action in actions]


def build_plan(found: Discovery, dest: Destination, policy: Policy, pool: ThreadPoolExecutor) -> Plan:
    """Validate every run and hash the files of the accepted ones (local work only)."""
    base = dest.key(found.name)
    runs: list[RunPlan] = []
    refused: list[Refusal] = []
    for run in found.runs:
        prefix = dest.key(found.name, run.rel)
        reasons = check_run(run, policy, prefix)
        if reasons:
            refused.append(Refusal(run.label, reasons))
        else:
            runs.append(RunPlan(run=run, prefix=prefix, digests=[]))
    jobs = [(rp, f) for rp in runs for f in rp.run.files]
    unreadable: dict[int, str] = {}
    for (rp, f), digest in zip(jobs, pool.map(_digest_or_error, [f for _, f in jobs])):
        if isinstance(digest, FileDigest):
            rp.digests.append(digest)
        else:
            unreadable.setdefault(id(rp), f"{f.rel}: cannot read ({digest}); check the file and rerun")
    refused += [Refusal(rp.run.label, [unreadable[id(rp)]]) for rp in runs if id(rp) in unreadable]
    runs = [rp for rp in runs if id(rp) not in unreadable]
    return Plan(runs=runs, refused=refused, base_prefix=base)


def _digest_or_error(f: LocalFile) -> FileDigest | str:
    try:
        return digest_file(f.rel, f.path)
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def resolve_actions(plan: Plan, client, dest: Destination, skip_existing: bool, pool: ThreadPoolExecutor) -> None:
    """Look at the destination (read-only) and decide each run's action.

    Runs that cannot go (already complete without --skip-existing, or a prefix
    holding foreign objects) move to ``plan.refused``.
    """
    if not plan.runs:
        return
    existing = list_objects(client, dest.bucket, plan.base_prefix)
    groups = assign_keys(existing, [rp.prefix for rp in plan.runs])
    kept: list[RunPlan] = []
    for rp in plan.runs:
        remote: RemoteRun = classify(client, dest.bucket, rp.prefix, rp.digests, groups[rp.prefix], pool)
        if remote.state is State.COMPLETE:
            if skip_existing:
                rp.action = Action.SKIP
            else:
                plan.refused.append(Refusal(rp.run.label, [
                    f"already uploaded (manifest present at {dest.url(rp.prefix)}/); a complete run is "
                    "never overwritten: pass --skip-existing to skip it, or upload under another prefix"
                ]))
                continue
        elif remote.state is State.FOREIGN:
            plan.refused.append(Refusal(rp.run.label, [
                f"{dest.url(rp.prefix)}/ holds {len(remote.foreign)} object(s) that are not part of this run "
                f"(e.g. {remote.foreign[0].rsplit('/', 1)[-1]}) and no manifest; remove them or upload "
                "under another prefix"
            ]))
            continue
        else:
            rp.action = Action.UPLOAD if remote.state is State.NEW else Action.RESUME
            rp.to_send = remote.to_send
            rp.kept = remote.kept
        kept.append(rp)
    plan.runs = kept
