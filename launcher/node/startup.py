"""The node job's start-up checks, before any server starts: the API-key rule (no key on
the server's command line), the inputs the server and the benchmark need, the job's API
key, and the engine version the node will run with the acceptance source it supports
(launcher.node.engine_preflight). A check that fails records why (logs/error.txt, the job's
end cause) and the job ends with a usage error."""
from __future__ import annotations

import logging
import os
from typing import Optional

from launcher.contracts.job import BENCH_MODULE
from launcher.engines import key_envs
from launcher.node import engine_preflight
from launcher.node.job_context import JobContext
from launcher.node.servers import ServerGroup
from launcher.runtime import apikey
from launcher.runtime.inputs import check_job_inputs


def startup_checks(ctx: JobContext, servers: ServerGroup) -> bool:
    """Run the checks in order; False (the reason recorded) when the job cannot go on."""
    if apikey.api_key_in_args(ctx.spec.server_flags, ctx.engine):
        ctx.end_cause = f"the server arguments pass {ctx.engine.key_flag}"
        ctx.fail(f"server arguments: {ctx.engine.key_flag} on the command line is refused "
                 f"(fix: {apikey.fix(ctx.engine)})")
        return False
    problems = _check_inputs(ctx)
    ctx.check_signal()  # a stop signal during the checks (it also reaches their subprocesses) wins
    if problems:
        ctx.end_cause = f"input check failed: {problems[0]}"
        for line in problems[1:]:
            ctx.log(f"ERROR: {line}", logging.ERROR)
        ctx.fail(f"input check failed before the server started: {problems[0]}"
                 + (f" (and {len(problems) - 1} more in {ctx.paths.shown(ctx.paths.job_log)})"
                    if len(problems) > 1 else ""))
        return False
    ctx.api_key = apikey.job_key(ctx.spec.bind_host, os.environ)
    ctx.log("server API key: " + (
        f"from the environment ({'/'.join((apikey.CLIENT_ENV, *key_envs()))})" if apikey.user_key(os.environ)
        else "generated for this job (server bound off loopback)" if ctx.api_key
        else "none (server bound to loopback)"))
    problem = _resolve_engine(ctx, servers)
    if problem:
        ctx.end_cause = f"engine check failed: {problem}"
        ctx.fail(f"engine check failed before the server started: {problem}")
        return False
    return True


def _check_inputs(ctx: JobContext) -> list[str]:
    """The inputs the server and the benchmark need, checked before the server starts."""
    sp, b = ctx.spec, ctx.spec.bench
    return check_job_inputs(model=sp.model, draft=(sp.speculative_config or {}).get("model"),
                            tokenizer=sp.tokenizer, env=os.environ,
                            bench=None if b is None or sp.bench_module != BENCH_MODULE else b)


def _resolve_engine(ctx: JobContext, servers: ServerGroup) -> Optional[str]:
    """The engine version and acceptance source this node runs (launcher.node.engine_preflight);
    a one-line problem when the version lacks what the job explicitly asks."""
    try:
        res = engine_preflight.resolve(ctx.spec, servers.server_env(), ctx.engine)
    except engine_preflight.EngineError as e:
        return str(e)
    ctx.spec = res.spec
    ctx.log(f"engine {ctx.spec.engine} {ctx.spec.engine_version or 'version unknown'} ({res.version_from}); "
            f"per-request acceptance from {ctx.spec.acceptance_source}")
    if res.note:
        ctx.log(res.note)
    return None
