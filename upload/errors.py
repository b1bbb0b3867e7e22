"""User-facing errors: each carries one line that names the problem and the fix."""

from __future__ import annotations


class UploadError(Exception):
    """A problem the user can fix; printed as one line, never as a traceback."""

    exit_code = 1


class UsageError(UploadError):
    """The command line or the environment is wrong; nothing was attempted."""

    exit_code = 2


def describe_aws_error(exc: BaseException) -> str:
    """One line for an exception raised by botocore/s3transfer."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        err = response.get("Error") or {}
        code = err.get("Code") or "error"
        message = err.get("Message") or ""
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        text = f"{code}" + (f" (HTTP {status})" if status else "")
        return f"{text}: {message}" if message else text
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
