"""Helpers the upload tests use to look at the bucket and the environment."""

from __future__ import annotations

import os

CREDENTIAL_ENV = {
    "AWS_ACCESS_KEY_ID": "testing-key-id",
    "AWS_SECRET_ACCESS_KEY": "testing-secret-access-key",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# Cleared for every test so the developer's own settings never leak in.
CLEARED_ENV = (
    "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_MAX_ATTEMPTS",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "SPECDEC_BENCH_S3_ENDPOINT", "SPECDEC_BENCH_S3_KEY_ID", "SPECDEC_BENCH_S3_SECRET", "HF_TOKEN",
)


def all_versions(s3, bucket: str) -> dict[str, list[dict]]:
    """Every key of the bucket with all its versions."""
    versions: dict[str, list[dict]] = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            versions.setdefault(v["Key"], []).append(v)
    return versions


def object_bytes(s3, bucket: str, key: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def subprocess_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env.update(CREDENTIAL_ENV)
    env.update(extra)
    return env
