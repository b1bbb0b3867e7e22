"""The per-run manifest: the object written last, after every file of the run.

Its presence at the destination is what makes a run complete; a run prefix
holding objects but no manifest is an interrupted upload.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from upload import __version__

MANIFEST_NAME = "_manifest.json"
SCHEMA_VERSION = 1
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileDigest:
    rel: str  # path inside the run
    path: Path
    size: int
    sha256: str  # hex

    @property
    def sha256_b64(self) -> str:
        """The digest as S3's x-amz-checksum-sha256 header wants it."""
        return base64.b64encode(bytes.fromhex(self.sha256)).decode("ascii")


def digest_file(rel: str, path: Path) -> FileDigest:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return FileDigest(rel=rel, path=path, size=size, sha256=h.hexdigest())


def build_manifest(run_label: str, digests: list[FileDigest]) -> dict:
    files = sorted(digests, key=lambda d: d.rel)
    return {
        "schema_version": SCHEMA_VERSION,
        "run": run_label,
        "tool": f"upload_to_s3 {__version__}",
        "uploaded_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "file_count": len(files),
        "total_bytes": sum(d.size for d in files),
        "files": [{"path": d.rel, "size": d.size, "sha256": d.sha256} for d in files],
    }


def manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=False) + "\n").encode("utf-8")
