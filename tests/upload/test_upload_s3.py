"""upload_to_s3 against a real S3-protocol server (moto_server in its own process).

Every bucket has versioning on: an object written twice shows up as two
versions, which is how these tests see duplicates.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from s3_fault_proxy import FaultProxy
from upload_s3_checks import all_versions, object_bytes, subprocess_env
from upload_samples import configuration, local_files, timing, write_run, write_sweep

POINTS = ["mtbench/t0_c1", "mtbench/t0_c4", "specbench/t0.7_c1"]


def expected_objects(job_dir: Path, prefix: str, points=POINTS) -> dict[str, bytes]:
    """Key -> bytes of every file the tool should upload (manifests excluded)."""
    out = {}
    for point in points:
        for rel, data in local_files(job_dir / point).items():
            out[f"{prefix}/{job_dir.name}/{point}/{rel}"] = data
    return out


def manifest_keys(keys) -> set[str]:
    return {k for k in keys if k.endswith("/_manifest.json")}


def assert_complete_and_exact(s3, bucket, job_dir, prefix, points=POINTS):
    """Every local file is there, byte for byte, once; one manifest per run; nothing else."""
    versions = all_versions(s3, bucket)
    expected = expected_objects(job_dir, prefix, points)
    manifests = {f"{prefix}/{job_dir.name}/{p}/_manifest.json" for p in points}
    assert set(versions) == set(expected) | manifests
    duplicated = {k: len(v) for k, v in versions.items() if len(v) != 1}
    assert duplicated == {}, f"objects written more than once: {duplicated}"
    for key, data in expected.items():
        assert object_bytes(s3, bucket, key) == data, key


# --- upload --------------------------------------------------------------------

def test_upload_sweep_layout_manifest_and_summary(s3, bucket, moto_server, run_cli, tmp_path):
    job = tmp_path / "qwen3_eagle3_tp1"
    write_sweep(job, POINTS)
    res = run_cli(job, f"s3://{bucket}/team/results", "--endpoint-url", moto_server)
    assert res.code == 0, res
    assert res.out.strip().endswith("3 uploaded, 0 skipped, 0 refused, 0 failed")
    assert_complete_and_exact(s3, bucket, job, "team/results")
    # job-level files are reported, not uploaded
    assert "Not uploaded: 3 file(s) outside any run directory" in res.out
    assert not [k for k in all_versions(s3, bucket) if k.endswith(("summary.json", "server.log"))]


def test_manifest_checksums_match_local_files(s3, bucket, moto_server, run_cli, tmp_path):
    run = write_run(tmp_path / "t0_c2", extra_files=2)
    assert run_cli(run, f"s3://{bucket}/m", "--endpoint-url", moto_server).code == 0
    manifest = json.loads(object_bytes(s3, bucket, "m/t0_c2/_manifest.json"))
    local = local_files(run)
    assert manifest["file_count"] == len(local) == len(manifest["files"])
    assert manifest["total_bytes"] == sum(len(b) for b in local.values())
    for entry in manifest["files"]:
        data = local[entry["path"]]
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        remote = object_bytes(s3, bucket, f"m/t0_c2/{entry['path']}")
        assert hashlib.sha256(remote).hexdigest() == entry["sha256"]
        head = s3.head_object(Bucket=bucket, Key=f"m/t0_c2/{entry['path']}", ChecksumMode="ENABLED")
        # the SDK sent the manifest's digest as the object's SHA-256 checksum
        assert head["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()


def test_manifest_is_written_after_every_file_of_its_run(s3, bucket, moto_server, run_cli, tmp_path):
    job = tmp_path / "order"
    write_sweep(job, POINTS)
    assert run_cli(job, f"s3://{bucket}/o", "--endpoint-url", moto_server, "--jobs", "4").code == 0
    versions = all_versions(s3, bucket)
    for point in POINTS:
        run_prefix = f"o/order/{point}/"
        stamps = {k: v[0]["LastModified"] for k, v in versions.items() if k.startswith(run_prefix)}
        manifest_time = stamps.pop(run_prefix + "_manifest.json")
        assert all(t <= manifest_time for t in stamps.values())


def test_large_file_goes_multipart_and_is_recorded(s3, bucket, moto_server, run_cli, tmp_path):
    run = write_run(tmp_path / "big_run")
    payload = hashlib.sha256(b"seed").digest() * (9 * 1024 * 1024 // 32 + 1)  # > 8 MiB threshold
    (run / "aiperf" / "profile_export_raw.jsonl").write_bytes(payload)
    assert run_cli(run, f"s3://{bucket}/big", "--endpoint-url", moto_server).code == 0
    key = "big/big_run/aiperf/profile_export_raw.jsonl"
    head = s3.head_object(Bucket=bucket, Key=key)
    assert head["ETag"].strip('"').endswith("-2")  # two parts
    assert head["Metadata"]["sha256"] == hashlib.sha256(payload).hexdigest()
    manifest = json.loads(object_bytes(s3, bucket, "big/big_run/_manifest.json"))
    assert {e["path"]: e["sha256"] for e in manifest["files"]}["aiperf/profile_export_raw.jsonl"] == \
        hashlib.sha256(payload).hexdigest()


# --- existing runs ---------------------------------------------------------------

def test_existing_complete_run_is_refused_and_left_untouched(s3, bucket, moto_server, run_cli, tmp_path):
    job = tmp_path / "again"
    write_sweep(job, POINTS)
    assert run_cli(job, f"s3://{bucket}/r", "--endpoint-url", moto_server).code == 0
    before = {k: [v["VersionId"] for v in vs] for k, vs in all_versions(s3, bucket).items()}
    runs = json.loads((job / POINTS[0] / "timing.json").read_text())  # a list of runs: change the last
    runs[-1]["specdec_launcher"]["duration_s"] = 99.0
    (job / POINTS[0] / "timing.json").write_text(json.dumps(runs))
    res = run_cli(job, f"s3://{bucket}/r", "--endpoint-url", moto_server)
    assert res.code == 1
    assert "0 uploaded, 0 skipped, 3 refused, 0 failed" in res.out
    assert res.out.count("already uploaded (manifest present") == 3
    after = {k: [v["VersionId"] for v in vs] for k, vs in all_versions(s3, bucket).items()}
    assert after == before


def test_skip_existing(s3, bucket, moto_server, run_cli, tmp_path):
    job = tmp_path / "skipper"
    write_sweep(job, POINTS[:2])
    assert run_cli(job, f"s3://{bucket}/s", "--endpoint-url", moto_server).code == 0
    write_run(job / POINTS[2], dataset="specbench", seed="late")  # a new point since
    res = run_cli(job, f"s3://{bucket}/s", "--endpoint-url", moto_server, "--skip-existing")
    assert res.code == 0, res
    assert res.out.strip().endswith("1 uploaded, 2 skipped, 0 refused, 0 failed")
    assert_complete_and_exact(s3, bucket, job, "s")


def test_prefix_with_foreign_objects_and_no_manifest_is_refused(s3, bucket, moto_server, run_cli, tmp_path):
    run = write_run(tmp_path / "t0_c1")
    s3.put_object(Bucket=bucket, Key="f/t0_c1/somebody_elses.csv", Body=b"a,b\n")
    res = run_cli(run, f"s3://{bucket}/f", "--endpoint-url", moto_server)
    assert res.code == 1 and "1 refused" in res.out
    assert "not part of this run (e.g. somebody_elses.csv)" in res.out
    assert set(all_versions(s3, bucket)) == {"f/t0_c1/somebody_elses.csv"}


def test_folder_marker_objects_do_not_block_a_run(s3, bucket, moto_server, run_cli, tmp_path):
    run = write_run(tmp_path / "t0_c1")
    s3.put_object(Bucket=bucket, Key="f/t0_c1/", Body=b"")
    res = run_cli(run, f"s3://{bucket}/f", "--endpoint-url", moto_server)
    assert res.code == 0, res
    assert "f/t0_c1/_manifest.json" in all_versions(s3, bucket)


# --- refusal before sending, dry run -------------------------------------------------

def test_missing_container_image_is_refused_before_any_object_is_sent(s3, bucket, moto_server, run_cli, tmp_path):
    job = tmp_path / "noimage"
    write_sweep(job, POINTS[:1])
    write_run(job / "mtbench/t0_c8", config=configuration(container_image=""))
    res = run_cli(job, f"s3://{bucket}/n", "--endpoint-url", moto_server)
    assert res.code == 1
    assert "noimage/mtbench/t0_c8" in res.out and "container_image is empty" in res.out
    assert "1 uploaded, 0 skipped, 1 refused, 0 failed" in res.out
    assert not [k for k in all_versions(s3, bucket) if "/t0_c8/" in k]


def test_all_runs_refused_sends_nothing_and_the_flag_lets_them_go(s3, bucket, moto_server, run_cli, tmp_path):
    run = write_run(tmp_path / "t0_c1", config=configuration(container_image=None))
    res = run_cli(run, f"s3://{bucket}/n", "--endpoint-url", moto_server)
    assert res.code == 1 and "0 uploaded, 0 skipped, 1 refused, 0 failed" in res.out
    assert all_versions(s3, bucket) == {}
    res = run_cli(run, f"s3://{bucket}/n", "--endpoint-url", moto_server, "--allow-incomplete-provenance")
    assert res.code == 0 and "1 uploaded" in res.out


def test_dry_run_sends_nothing_and_prints_the_plan(s3, bucket, moto_server, run_cli, tmp_path):
    job = tmp_path / "dry"
    write_sweep(job, POINTS)
    write_run(job / "mtbench/t1_c1", timing_doc=timing(total_output_tokens=0))
    res = run_cli(job, f"s3://{bucket}/d", "--endpoint-url", moto_server, "--dry-run")
    assert res.code == 1  # one run refused
    assert all_versions(s3, bucket) == {}
    sizes = {p: sum(len(b) for b in local_files(job / p).values()) for p in POINTS}
    for point in POINTS:
        row = next(line for line in res.out.splitlines() if f"dry/{point} " in line)
        assert f"s3://{bucket}/d/dry/{point}/" in row
        assert f" {len(local_files(job / point))} " in row and f"{sizes[point]:,}" in row
    assert "dry/mtbench/t1_c1" in res.out and "generated 0 tokens" in res.out
    assert "dry run, nothing sent: 3 to upload, 0 to skip, 1 refused" in res.out


# --- interruption, failures, retries ---------------------------------------------------

def test_killed_upload_completes_on_rerun_without_missing_or_duplicated_objects(
    s3, bucket, moto_server, run_cli, tmp_path
):
    """The client process is SIGKILLed mid-upload (no cleanup can run), then rerun.

    moto_server keeps its state only in memory, so the server stays up and the
    client is the one interrupted: a proxy lets 5 object PUTs through, then
    holds the rest unanswered while the test kills the uploader.
    """
    job = tmp_path / "killed"
    write_sweep(job, POINTS, extra_files=3)  # 10 files per run
    proxy = FaultProxy(int(moto_server.rsplit(":", 1)[1]))
    try:
        proxy.fault_after_puts(5, "hold")
        proc = subprocess.Popen(
            [sys.executable, "-m", "upload", str(job), f"s3://{bucket}/k", "--endpoint-url", proxy.url, "--jobs", "2"],
            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while not (proxy.held.is_set() and proxy.puts_forwarded == 5):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the upload never reached the held request"
            time.sleep(0.02)
        proc.kill()
        proc.wait()
    finally:
        proxy.close()
    partial = all_versions(s3, bucket)
    assert len(partial) == 5 and not manifest_keys(partial)
    partial_versions = {k: v[0]["VersionId"] for k, v in partial.items()}

    res = run_cli(job, f"s3://{bucket}/k", "--endpoint-url", moto_server, "--skip-existing")
    assert res.code == 0, res
    assert "3 uploaded, 0 skipped, 0 refused, 0 failed" in res.out
    assert "(1 resumed)" in res.out and f"{30 - 5} file(s)" in res.out
    assert_complete_and_exact(s3, bucket, job, "k")
    final = all_versions(s3, bucket)
    assert {k: final[k][0]["VersionId"] for k in partial} == partial_versions  # not sent again


def test_server_lost_mid_upload_fails_the_run_then_the_rerun_completes(
    s3, bucket, moto_server, run_cli, tmp_path, monkeypatch
):
    job = tmp_path / "lost"
    write_sweep(job, POINTS[:1], extra_files=5)  # one run, 12 files
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    proxy = FaultProxy(int(moto_server.rsplit(":", 1)[1]))
    try:
        proxy.fault_after_puts(4, "drop")  # the server "goes away" after 4 objects
        res = run_cli(job, f"s3://{bucket}/l", "--endpoint-url", proxy.url, "--jobs", "1")
    finally:
        proxy.close()
    assert res.code == 1
    assert "0 uploaded, 0 skipped, 0 refused, 1 failed" in res.out
    assert "rerun the same command" in res.out
    partial = all_versions(s3, bucket)
    assert len(partial) == 4 and not manifest_keys(partial)

    res = run_cli(job, f"s3://{bucket}/l", "--endpoint-url", moto_server)
    assert res.code == 0, res
    assert "resume: 4 of 12 already there" not in res.out  # the plan table is for --dry-run only
    assert "1 uploaded" in res.out and "8 file(s)" in res.out
    assert_complete_and_exact(s3, bucket, job, "l", POINTS[:1])


def test_resume_resends_a_file_that_changed_since_the_interruption(s3, bucket, moto_server, run_cli, tmp_path):
    run = write_run(tmp_path / "t0_c1")
    s3.put_object(Bucket=bucket, Key="c/t0_c1/timing.json", Body=b"{}", Metadata={"sha256": "0" * 64})
    s3.put_object(Bucket=bucket, Key="c/t0_c1/COMPLETE", Body=(run / "COMPLETE").read_bytes(),
                  Metadata={"sha256": hashlib.sha256((run / "COMPLETE").read_bytes()).hexdigest()})
    dry = run_cli(run, f"s3://{bucket}/c", "--endpoint-url", moto_server, "--dry-run")
    assert "resume: 1 of 7 already there" in dry.out
    res = run_cli(run, f"s3://{bucket}/c", "--endpoint-url", moto_server)
    assert res.code == 0, res
    versions = all_versions(s3, bucket)
    assert len(versions["c/t0_c1/timing.json"]) == 2  # the stale object was replaced
    assert len(versions["c/t0_c1/COMPLETE"]) == 1  # the identical one was kept
    assert object_bytes(s3, bucket, "c/t0_c1/timing.json") == (run / "timing.json").read_bytes()


def test_transient_errors_are_retried(s3, bucket, moto_server, run_cli, tmp_path):
    job = tmp_path / "flaky"
    write_sweep(job, POINTS[:2])
    proxy = FaultProxy(int(moto_server.rsplit(":", 1)[1]))
    try:
        proxy.fail_first_puts(3)  # 503 SlowDown
        res = run_cli(job, f"s3://{bucket}/t", "--endpoint-url", proxy.url, "--jobs", "4")
    finally:
        proxy.close()
    assert res.code == 0, res
    assert proxy.puts_failed == 3
    assert_complete_and_exact(s3, bucket, job, "t", POINTS[:2])


# --- environment ---------------------------------------------------------------------

def test_specdec_environment_names_give_endpoint_and_credentials(s3, bucket, moto_server, tmp_path):
    run = write_run(tmp_path / "envrun")
    env = subprocess_env(SPECDEC_BENCH_S3_ENDPOINT=moto_server, SPECDEC_BENCH_S3_KEY_ID="spec-key",
                         SPECDEC_BENCH_S3_SECRET="spec-secret-value")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        env.pop(name)
    env["AWS_SHARED_CREDENTIALS_FILE"] = env["AWS_CONFIG_FILE"] = str(tmp_path / "none")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    done = subprocess.run([sys.executable, "-m", "upload", str(run), f"s3://{bucket}/e"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 uploaded, 0 skipped, 0 refused, 0 failed" in done.stdout
    assert "e/envrun/_manifest.json" in all_versions(s3, bucket)

    env.pop("SPECDEC_BENCH_S3_SECRET")
    done = subprocess.run([sys.executable, "-m", "upload", str(run), f"s3://{bucket}/e2"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == ("upload_to_s3: error: SPECDEC_BENCH_S3_KEY_ID is set but SPECDEC_BENCH_S3_SECRET "
                                   "is not; set both, or neither to use the AWS variables")


def test_missing_bucket_is_one_line(moto_server, run_cli, tmp_path):
    run = write_run(tmp_path / "r")
    res = run_cli(run, "s3://no-such-bucket-here/x", "--endpoint-url", moto_server)
    assert res.code == 1
    assert res.err.strip() == (f"upload_to_s3: error: bucket 'no-such-bucket-here' does not exist at {moto_server}; "
                               "create it or fix the destination URL")


def test_unreachable_endpoint_is_one_line(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    run = write_run(tmp_path / "r")
    res = run_cli(run, "s3://some-bucket/x", "--endpoint-url", "http://127.0.0.1:9")
    assert res.code == 1
    assert res.err.strip() == ("upload_to_s3: error: cannot reach the S3 endpoint http://127.0.0.1:9; "
                               "check --endpoint-url or SPECDEC_BENCH_S3_ENDPOINT")
    assert "Traceback" not in res.err
