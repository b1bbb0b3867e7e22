"""Send the planned runs: files in parallel through boto3's transfer manager,
then each run's manifest once all of its files are confirmed.

Integrity: a file below the multipart threshold is sent with its SHA-256 (the
very digest the manifest records) in x-amz-checksum-sha256, so S3 rejects the
object when the bytes it received differ; a multipart file carries per-part
SHA-256 checksums computed by the SDK.  Every object also records its SHA-256
as x-amz-meta-sha256, which lets an interrupted run be resumed exactly.
"""

from __future__ import annotations

import hashlib
import base64
import mimetypes
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from boto3.s3.transfer import create_transfer_manager
from botocore.exceptions import ClientError
from s3transfer.subscribers import BaseSubscriber

from upload.destination import Destination
from upload.errors import describe_aws_error
from upload.manifest import MANIFEST_NAME, FileDigest, build_manifest, manifest_bytes
from upload.upload_plan import RunPlan
from upload.remote import SHA256_METADATA
from upload.s3settings import transfer_config

_CONTENT_TYPES = {".json": "application/json", ".jsonl": "application/x-ndjson", ".log": "text/plain"}


class ProgressSink(Protocol):
    def add_bytes(self, n: int) -> None: ...
    def file_done(self) -> None: ...


@dataclass
class RunResult:
    plan: RunPlan
    error: str | None = None  # None: uploaded and manifest written

    @property
    def ok(self) -> bool:
        return self.error is None


class _Events(BaseSubscriber):
    """Forwards s3transfer's callbacks: bytes to the progress bar, completion to a queue."""

    def __init__(self, events: queue.Queue, run_index: int, digest: FileDigest, sink: ProgressSink):
        self._events, self._run, self._digest, self._sink = events, run_index, digest, sink

    def on_progress(self, future, bytes_transferred, **kwargs):
        self._sink.add_bytes(bytes_transferred)

    def on_done(self, future, **kwargs):
        try:
            future.result()
            error = None
        except BaseException as exc:  # reported per run, never raised here
            error = exc
        self._events.put((self._run, self._digest, error))


def _content_type(rel: str) -> str:
    suffix = "." + rel.rsplit(".", 1)[-1] if "." in rel else ""
    return _CONTENT_TYPES.get(suffix) or mimetypes.guess_type(rel)[0] or "application/octet-stream"


def extra_args(digest: FileDigest, multipart_threshold: int) -> dict:
    args = {"Metadata": {SHA256_METADATA: digest.sha256}, "ContentType": _content_type(digest.rel)}
    if digest.size < multipart_threshold:
        args["ChecksumSHA256"] = digest.sha256_b64  # the server checks the bytes against it
        args["ChecksumAlgorithm"] = "SHA256"
    else:
        args["ChecksumAlgorithm"] = "SHA256"  # per part; S3 has no full-object SHA-256 for multipart
    return args


def put_manifest(client, dest: Destination, rp: RunPlan) -> None:
    """Write the manifest, only if no manifest exists yet (a conditional PUT)."""
    body = manifest_bytes(build_manifest(rp.run.label, rp.digests))
    args = dict(
        Bucket=dest.bucket,
        Key=f"{rp.prefix}/{MANIFEST_NAME}",
        Body=body,
        ContentType="application/json",
        ChecksumSHA256=base64.b64encode(hashlib.sha256(body).digest()).decode("ascii"),
        Metadata={SHA256_METADATA: hashlib.sha256(body).hexdigest()},
    )
    try:
        client.put_object(IfNoneMatch="*", **args)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code == "PreconditionFailed":
            raise RuntimeError("another upload completed this run meanwhile; its manifest was kept") from None
        if code != "NotImplemented":
            raise
        client.put_object(**args)  # a store without conditional writes


def upload_runs(client, dest: Destination, runs: list[RunPlan], jobs: int, sink: ProgressSink) -> list[RunResult]:
    config = transfer_config(jobs)
    events: queue.Queue = queue.Queue()
    pending = [len(rp.to_send) for rp in runs]
    errors: list[list[str]] = [[] for _ in runs]
    manifests: dict[int, Future] = {}
    with ThreadPoolExecutor(max_workers=min(jobs, 8), thread_name_prefix="manifest") as manifest_pool:
        with create_transfer_manager(client, config) as manager:
            for i, rp in enumerate(runs):
                if not rp.to_send:  # resumed run whose files were all there already
                    manifests[i] = manifest_pool.submit(put_manifest, client, dest, rp)
            for i, rp in enumerate(runs):
                for digest in rp.to_send:
                    manager.upload(
                        str(digest.path),
                        dest.bucket,
                        f"{rp.prefix}/{digest.rel}",
                        extra_args=extra_args(digest, config.multipart_threshold),
                        subscribers=[_Events(events, i, digest, sink)],
                    )
            for _ in range(sum(pending)):
                i, digest, error = events.get()
                sink.file_done()
                if error is not None:
                    errors[i].append(f"{digest.rel}: {describe_aws_error(error)}")
                pending[i] -= 1
                if pending[i] == 0 and not errors[i]:
                    manifests[i] = manifest_pool.submit(put_manifest, client, dest, runs[i])
        results = []
        for i, rp in enumerate(runs):
            if errors[i]:
                more = f" (and {len(errors[i]) - 1} more)" if len(errors[i]) > 1 else ""
                results.append(RunResult(rp, errors[i][0] + more))
                continue
            try:
                manifests[i].result()
                results.append(RunResult(rp))
            except Exception as exc:
                results.append(RunResult(rp, f"{MANIFEST_NAME}: {describe_aws_error(exc)}"))
    return results
