"""What the destination already holds, and what that means for each run.

One paginated listing of ``prefix/<local_dir_name>/`` tells, per run:
* its manifest exists        -> complete (skip or refuse; never overwritten);
* none of its objects exist  -> new;
* some objects, no manifest  -> interrupted: resume.  An existing object is
  kept when its size and recorded sha256 (object metadata) match the local
  file, and sent again otherwise;
* objects that are not part of the local run, and no manifest -> refused
  (the prefix holds something else; the uploader does not delete).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from botocore.exceptions import ClientError

from upload.manifest import MANIFEST_NAME, FileDigest

SHA256_METADATA = "sha256"  # x-amz-meta-sha256, written with every object


def list_objects(client, bucket: str, prefix: str) -> dict[str, int]:
    """Every key under ``prefix/`` with its size."""
    found: dict[str, int] = {}
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            found[obj["Key"]] = obj["Size"]
    return found


def assign_keys(existing: dict[str, int], run_prefixes: list[str]) -> dict[str, dict[str, int]]:
    """Group keys by the deepest run prefix above them; keys under no run are dropped."""
    wanted = set(run_prefixes)
    groups: dict[str, dict[str, int]] = {p: {} for p in run_prefixes}
    for key, size in existing.items():
        if key.endswith("/"):  # a zero-byte "folder" marker some tools create
            continue
        parent = key
        while "/" in parent:
            parent = parent.rsplit("/", 1)[0]
            if parent in wanted:
                groups[parent][key] = size
                break
    return groups


class State(Enum):
    NEW = "new"
    PARTIAL = "partial"
    COMPLETE = "complete"
    FOREIGN = "foreign"


@dataclass
class RemoteRun:
    state: State
    to_send: list[FileDigest] = field(default_factory=list)
    kept: int = 0  # objects already there and identical
    foreign: list[str] = field(default_factory=list)


def _same_object(client, bucket: str, key: str, digest: FileDigest) -> bool:
    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False  # deleted since the listing: send it again
        raise
    return head.get("Metadata", {}).get(SHA256_METADATA) == digest.sha256


def classify(
    client, bucket: str, run_prefix: str, digests: list[FileDigest], own: dict[str, int], pool: ThreadPoolExecutor
) -> RemoteRun:
    if f"{run_prefix}/{MANIFEST_NAME}" in own:
        return RemoteRun(State.COMPLETE)
    if not own:
        return RemoteRun(State.NEW, to_send=list(digests))
    by_key = {f"{run_prefix}/{d.rel}": d for d in digests}
    foreign = sorted(k for k in own if k not in by_key)
    if foreign:
        return RemoteRun(State.FOREIGN, foreign=foreign)
    same_size = [(k, d) for k, d in by_key.items() if own.get(k) == d.size]
    same = dict(zip((k for k, _ in same_size), pool.map(lambda kd: _same_object(client, bucket, *kd), same_size)))
    to_send = [d for k, d in by_key.items() if not same.get(k, False)]
    return RemoteRun(State.PARTIAL, to_send=to_send, kept=len(digests) - len(to_send))
