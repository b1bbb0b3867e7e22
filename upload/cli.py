"""``upload_to_s3 LOCAL_DIR s3://bucket/prefix``: validate, plan, then upload.

Exit status: 0 when every run was uploaded or skipped; 1 when any run was
refused or failed (or S3 could not be used); 2 for a wrong command line or
environment; 130 when interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError
from rich.console import Console
from rich.text import Text

from upload import __version__
from upload.destination import Destination, parse_destination
from upload.discovery import RUN_MARKERS, discover
from upload.errors import UploadError, UsageError, describe_aws_error
from upload.upload_plan import Action, Plan, build_plan, resolve_actions
from upload.report import Counts, ProgressBar, print_failures, print_outside, print_plan, print_refused
from upload.s3settings import ENV_ENDPOINT, S3Settings, make_client, resolve_settings
from upload.transfer import upload_runs
from upload.validation import Policy
from upload.validity_gate import DEFAULT_MAX_FAILED_FRACTION

PROG = "upload_to_s3"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of usage + message
        raise UsageError(f"{message} (see {PROG} --help)")


def _in_range(text: str, convert, lo, hi, kind: str):
    """``text`` as ``convert`` makes it, between ``lo`` and ``hi``; else argparse's one-line error."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"{text!r} is not between {lo} and {hi}")
    return value


def _fraction(text: str) -> float:
    return _in_range(text, float, 0, 1, "a number between 0 and 1")


def _jobs(text: str) -> int:
    return _in_range(text, int, 1, 256, "a whole number")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Validate benchmark result directories, then upload them to S3 "
        "without overwriting complete runs or leaving half-uploaded ones.",
    )
    p.add_argument("local_dir", metavar="LOCAL_DIR", help="a run, a folder of runs, or a sweep")
    p.add_argument("destination", metavar="s3://BUCKET/PREFIX", help="objects go to PREFIX/<LOCAL_DIR name>/<run>/<file>")
    p.add_argument("--dry-run", action="store_true", help="validate and print the plan; send nothing")
    p.add_argument("--skip-existing", action="store_true", help="skip runs already complete at the destination")
    p.add_argument("--endpoint-url", "--endpoint", dest="endpoint_url", metavar="URL",
                   help=f"S3-compatible endpoint (default: ${ENV_ENDPOINT}, else AWS)")
    p.add_argument("--allow-incomplete-provenance", action="store_true",
                   help="upload runs whose provenance fields are empty")
    p.add_argument("--allow-invalid", action="store_true",
                   help="upload runs that fail the validity gate (0 tokens, failed requests, Average_AL < 1)")
    p.add_argument("--max-failed-fraction", type=_fraction, default=DEFAULT_MAX_FAILED_FRACTION, metavar="F",
                   help="largest accepted failed_requests / num_requests (default %(default)s)")
    p.add_argument("--jobs", "-j", type=_jobs, default=16, metavar="N", help="parallel transfers (default 16)")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return p


def _s3_problem(exc: BaseException, dest: Destination, settings: S3Settings) -> str:
    where = settings.endpoint_url or "AWS S3"
    if isinstance(exc, EndpointConnectionError):
        return f"cannot reach the S3 endpoint {where}; check --endpoint-url or {ENV_ENDPOINT}"
    code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None
    if code == "NoSuchBucket":
        return f"bucket {dest.bucket!r} does not exist at {where}; create it or fix the destination URL"
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
        return f"S3 refused the credentials from {settings.credential_source} ({code}); check them"
    return f"S3 error at {where}: {describe_aws_error(exc)}"


def _line(console: Console, text: str, style: str | None = None) -> None:
    console.print(Text(text, style=style or ""), soft_wrap=True)


def _run(args: argparse.Namespace, dest: Destination, settings: S3Settings, out: Console, err: Console) -> int:
    found = discover(args.local_dir)
    if not found.runs:
        raise UsageError(
            f"no run directories under {args.local_dir!r} (a run directory holds "
            f"{', '.join(RUN_MARKERS[:-1])} or {RUN_MARKERS[-1]}); check the path"
        )
    policy = Policy(
        allow_incomplete_provenance=args.allow_incomplete_provenance,
        allow_invalid=args.allow_invalid,
        max_failed_fraction=args.max_failed_fraction,
        environment=dict(os.environ),
    )
    with ThreadPoolExecutor(max_workers=args.jobs, thread_name_prefix="plan") as pool:
        plan = build_plan(found, dest, policy, pool)
        client = None
        if plan.runs:
            try:
                client = make_client(settings, max_connections=args.jobs + 8)
                resolve_actions(plan, client, dest, args.skip_existing, pool)
            except (UsageError, BotoCoreError, ClientError) as exc:
                if not args.dry_run:
                    raise
                why = str(exc) if isinstance(exc, UsageError) else _s3_problem(exc, dest, settings)
                _line(err, f"destination not checked: {why}", "yellow")

    print_outside(out, found.outside)
    print_refused(out, plan.refused)
    if args.dry_run:
        return _dry_run(plan, dest, out)
    return _upload(plan, dest, client, args.jobs, out, err)


def _dry_run(plan: Plan, dest: Destination, out: Console) -> int:
    if plan.runs:
        print_plan(out, plan, dest)
    skipped = len(plan.with_action(Action.SKIP))
    counts = Counts(uploaded=len(plan.runs) - skipped, skipped=skipped, refused=len(plan.refused))
    _line(out, f"dry run, nothing sent: {counts.uploaded} to upload, {skipped} to skip, {counts.refused} refused")
    return counts.exit_code


def _upload(plan: Plan, dest: Destination, client, jobs: int, out: Console, err: Console) -> int:
    to_go = plan.with_action(Action.UPLOAD, Action.RESUME)
    counts = Counts(skipped=len(plan.with_action(Action.SKIP)), refused=len(plan.refused))
    if to_go:
        files = sum(len(r.to_send) for r in to_go)
        size = sum(r.send_bytes for r in to_go)
        resumed = len([r for r in to_go if r.action is Action.RESUME])
        _line(out, f"uploading {len(to_go)} run(s), {files} file(s), {size:,} bytes to "
                   f"{dest.url(plan.base_prefix)}/" + (f" ({resumed} resumed)" if resumed else ""))
        with ProgressBar(err, files, size) as bar:
            results = upload_runs(client, dest, to_go, jobs, bar)
        print_failures(out, results)
        counts.uploaded = sum(r.ok for r in results)
        counts.failed = len(results) - counts.uploaded
    _line(out, counts.line())
    return counts.exit_code


def main(argv: list[str] | None = None) -> int:
    out = Console(file=sys.stdout, highlight=False)
    err = Console(file=sys.stderr, highlight=False)
    settings = None
    dest = None
    try:
        args = build_parser().parse_args(argv)
        dest = parse_destination(args.destination)
        settings = resolve_settings(os.environ, args.endpoint_url)
        return _run(args, dest, settings, out, err)
    except UploadError as exc:
        _line(err, f"{PROG}: error: {exc}", "red")
        return exc.exit_code
    except (BotoCoreError, ClientError) as exc:
        problem = _s3_problem(exc, dest, settings) if dest and settings else describe_aws_error(exc)
        _line(err, f"{PROG}: error: {problem}", "red")
        return 1
    except KeyboardInterrupt:
        _line(err, f"{PROG}: interrupted; runs without a manifest are incomplete: rerun the same "
                   "command (with --skip-existing) to complete them", "yellow")
        return 130


if __name__ == "__main__":
    sys.exit(main())
