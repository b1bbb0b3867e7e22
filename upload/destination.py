"""The S3 destination URL and the object-key layout."""

from __future__ import annotations

import re
from dataclasses import dataclass

from upload.errors import UsageError

# S3's rules for new bucket names (lowercase, digits, dots, hyphens; 3-63).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
MAX_KEY_BYTES = 1024


@dataclass(frozen=True)
class Destination:
    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    def key(self, *parts: str) -> str:
        """Join the prefix and the parts with '/', dropping empty parts."""
        return "/".join(p for p in (self.prefix, *parts) if p)

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"


def parse_destination(text: str) -> Destination:
    """Parse ``s3://bucket[/prefix]``."""
    if not text.startswith("s3://"):
        raise UsageError(
            f"destination {text!r} is not an S3 URL; write it as s3://BUCKET[/PREFIX]"
        )
    rest = text[len("s3://"):]
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.match(bucket):
        raise UsageError(
            f"destination {text!r}: bucket name {bucket!r} is not valid "
            "(3-63 characters: lowercase letters, digits, '.', '-'); fix the URL"
        )
    prefix = prefix.strip("/")
    if "//" in prefix:
        raise UsageError(
            f"destination {text!r}: the prefix has an empty path segment ('//'); fix the URL"
        )
    return Destination(bucket=bucket, prefix=prefix)
