"""Credentials, endpoint and tuning of the S3 client, from the environment.

Precedence:
* endpoint: --endpoint-url, then SPECDEC_BENCH_S3_ENDPOINT, then botocore's own
  AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, then AWS.
* credentials: SPECDEC_BENCH_S3_KEY_ID + SPECDEC_BENCH_S3_SECRET when both are
  set, else boto3's standard chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
  AWS_SESSION_TOKEN, AWS_PROFILE, config files, instance roles).
* retries: botocore's "standard" mode (exponential backoff with jitter on
  throttling, 5xx and connection errors), AWS_MAX_ATTEMPTS attempts (default 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from upload import __version__
from upload.errors import UsageError

ENV_ENDPOINT = "SPECDEC_BENCH_S3_ENDPOINT"
ENV_KEY_ID = "SPECDEC_BENCH_S3_KEY_ID"
ENV_SECRET = "SPECDEC_BENCH_S3_SECRET"
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class S3Settings:
    endpoint_url: str | None
    key_id: str | None
    secret: str | None
    max_attempts: int

    @property
    def credential_source(self) -> str:
        return f"{ENV_KEY_ID}/{ENV_SECRET}" if self.key_id else "the AWS credential chain"


def _endpoint(flag: str | None, env: Mapping[str, str]) -> str | None:
    if flag:
        value, origin = flag, "--endpoint-url"
    elif env.get(ENV_ENDPOINT, "").strip():
        value, origin = env[ENV_ENDPOINT].strip(), ENV_ENDPOINT
    else:
        return None
    if not value.startswith(("http://", "https://")):
        raise UsageError(f"{origin} {value!r} is not an http(s) URL; write it like https://s3.example.com")
    return value


def resolve_settings(env: Mapping[str, str], endpoint_flag: str | None = None) -> S3Settings:
    key_id = env.get(ENV_KEY_ID, "").strip() or None
    secret = env.get(ENV_SECRET, "").strip() or None
    if bool(key_id) != bool(secret):
        have, lack = (ENV_KEY_ID, ENV_SECRET) if key_id else (ENV_SECRET, ENV_KEY_ID)
        raise UsageError(f"{have} is set but {lack} is not; set both, or neither to use the AWS variables")
    raw_attempts = env.get("AWS_MAX_ATTEMPTS", "").strip()
    try:
        attempts = int(raw_attempts) if raw_attempts else DEFAULT_MAX_ATTEMPTS
        if attempts < 1:
            raise ValueError
    except ValueError:
        raise UsageError(f"AWS_MAX_ATTEMPTS={raw_attempts!r} is not a positive integer; fix or unset it") from None
    return S3Settings(
        endpoint_url=_endpoint(endpoint_flag, env), key_id=key_id, secret=secret, max_attempts=attempts
    )


def make_client(settings: S3Settings, max_connections: int):
    """A thread-safe S3 client; raises UsageError when no credentials are found."""
    session = boto3.session.Session(
        aws_access_key_id=settings.key_id, aws_secret_access_key=settings.secret
    )
    if session.get_credentials() is None:
        raise UsageError(
            f"no S3 credentials: set {ENV_KEY_ID} and {ENV_SECRET}, "
            "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    config = Config(
        retries={"mode": "standard", "total_max_attempts": settings.max_attempts},
        max_pool_connections=max_connections,
        user_agent_extra=f"specdec-upload/{__version__}",
        # S3-compatible stores (MinIO, Ceph, moto) want path-style URLs.
        s3={"addressing_style": "path"} if settings.endpoint_url else None,
    )
    return session.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        region_name=session.region_name or DEFAULT_REGION,
        config=config,
    )


def transfer_config(jobs: int) -> TransferConfig:
    """One TransferConfig shared by every upload: ``jobs`` transfers in flight."""
    return TransferConfig(max_concurrency=jobs, use_threads=True, preferred_transfer_client="classic")
