"""Where the history's runs come from: an S3 prefix the uploader wrote, or a local folder.

A *run* is what the uploader calls one: a folder holding configuration.json,
timing.json or acceptance_rate.json (launcher.results.layout.RUN_FILES), i.e. one
point of ours or one specdec_bench output folder. On S3 the prefix is listed once;
only the files the history reads (:data:`WANTED`) are fetched, in parallel, into a
local mirror with the same layout, which launcher.results then reads like any
folder. A run prefix without the uploader's manifest is an interrupted upload and
is left out (counted). Credentials and endpoint: the uploader's settings
(upload.s3settings: SPECDEC_BENCH_S3_ENDPOINT / --endpoint-url, SPECDEC_BENCH_S3_KEY_ID
and _SECRET, else the AWS chain).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.contracts.job_paths import LOGS_DIR
from launcher.results.layout import COMPLETE_FILE, RUN_FILES
from launcher.results.repeats.record import REPEATS_FILE
from upload.manifest import MANIFEST_NAME
from upload.destination import parse_destination
from upload.errors import UploadError

SPEEDUP_FILE = "speedup.json"   # launcher.speedup's per-point file (compare reads it)
# What the history reads of a run: its provenance, its metric files, its repeats and speedup.
WANTED = (*RUN_FILES, REPEATS_FILE, SPEEDUP_FILE)
MARKERS = (COMPLETE_FILE,)      # read from the listing alone (empty files)
# Folders inside a run that hold artefacts, never runs of their own.
ARTEFACT_DIRS = ("aiperf", "aiperf_repeats", "report", LOGS_DIR, "__pycache__")


class SourceError(Exception):
    """A source that cannot be read; the message is one line with the fix."""


@dataclass
class Fetched:
    source: str                       # as given (s3://bucket/prefix or a folder)
    runs: list[tuple[str, Path]]      # (the run's place in the source, its local folder)
    objects_listed: int = 0
    files_read: int = 0
    bytes_read: int = 0
    incomplete: list[str] = field(default_factory=list)   # run prefixes without a manifest
    list_s: float = 0.0
    read_s: float = 0.0


def _in_artefacts(parts: list[str]) -> bool:
    return any(p in ARTEFACT_DIRS or p.startswith("aiperf_repeats") for p in parts)


def local_runs(root: Path) -> Fetched:
    """Every run folder under ``root`` (a run's own artefact folders are not descended into)."""
    root = Path(root)
    if not root.is_dir():
        raise SourceError(f"{root}: not a folder; give a results folder or s3://BUCKET/PREFIX")
    t0 = time.monotonic()
    runs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _in_artefacts([d]))
        if any(f in filenames for f in RUN_FILES):
            here = Path(dirpath)
            runs.append((here.relative_to(root).as_posix() or ".", here))
    return Fetched(source=str(root), runs=runs, list_s=time.monotonic() - t0)


def group_keys(keys: dict[str, int], prefix: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """{run prefix: {file name: size}} of the wanted files, and the run prefixes without a
    manifest. A run prefix is the folder of a run file, outside artefact folders."""
    runs: dict[str, dict[str, int]] = {}
    manifests: set[str] = set()
    for key, size in keys.items():
        folder, _, name = key.rpartition("/")
        rel = folder[len(prefix):].strip("/") if prefix else folder
        if _in_artefacts(rel.split("/")):
            continue
        if name == MANIFEST_NAME:
            manifests.add(folder)
        elif name in WANTED or name in MARKERS:
            runs.setdefault(folder, {})[name] = size
    runs = {f: files for f, files in runs.items() if any(n in RUN_FILES for n in files)}
    incomplete = sorted(f for f in runs if f not in manifests)
    return {f: files for f, files in runs.items() if f in manifests}, incomplete


def s3_runs(url: str, mirror: Path, endpoint_url: Optional[str] = None, jobs: int = 32) -> Fetched:
    """List ``s3://bucket/prefix`` once, fetch each complete run's wanted files in parallel."""
    from upload.remote import list_objects  # lazy: imports botocore; only an s3:// source needs it
    from upload.s3settings import make_client, resolve_settings  # lazy: boto3 (~0.1 s); only an s3:// source needs it

    try:
        dest = parse_destination(url)
        client = make_client(resolve_settings(os.environ, endpoint_url), max_connections=jobs + 4)
    except UploadError as e:
        raise SourceError(str(e)) from None
    t0 = time.monotonic()
    keys = list_objects(client, dest.bucket, dest.prefix) if dest.prefix else _list_bucket(client, dest.bucket)
    listed = time.monotonic()
    runs, incomplete = group_keys(keys, dest.prefix)
    todo = [(f"{folder}/{name}", size) for folder, files in sorted(runs.items())
            for name, size in sorted(files.items()) if name in WANTED]
    for folder, files in runs.items():
        (mirror / folder).mkdir(parents=True, exist_ok=True)
        for name in files:
            if name in MARKERS:
                (mirror / folder / name).touch()

    def get(item: tuple[str, int]) -> int:
        key, _ = item
        body = client.get_object(Bucket=dest.bucket, Key=key)["Body"].read()
        (mirror / key).write_bytes(body)
        return len(body)

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="history-read") as pool:
        sizes = list(pool.map(get, todo))
    rel = lambda f: f[len(dest.prefix):].strip("/") if dest.prefix else f  # noqa: E731
    return Fetched(source=url, runs=[(rel(f) or ".", mirror / f) for f in sorted(runs)],
                   objects_listed=len(keys), files_read=len(todo), bytes_read=sum(sizes),
                   incomplete=incomplete, list_s=listed - t0, read_s=time.monotonic() - listed)


def _list_bucket(client, bucket: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            found[obj["Key"]] = obj["Size"]
    return found


def fetch(source: str, mirror: Path, endpoint_url: Optional[str] = None, jobs: int = 32) -> Fetched:
    if source.startswith("s3://"):
        return s3_runs(source, mirror, endpoint_url, jobs)
    return local_runs(Path(source))
