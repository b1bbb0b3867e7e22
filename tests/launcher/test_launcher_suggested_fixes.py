"""issue 41 item 1: every validation error whose fix names an override gives one that works.

Each case is a command line the launcher refuses. For each error, every override its fix
names (`key=value`, not a `<placeholder>`) is typed after the same command line, alone, and
the recipe must then validate. A map-valued key merges (sweep.num_requests_per_concurrency):
narrowing a recipe's concurrencies from the command line is not an error; the plan says
which entries it ignores."""
from __future__ import annotations

import re

import pytest

from launcher.login.config.compose import compose_recipe
from launcher.login.config.validate import validate
from launcher.login.errors import UserError
from tests.support.login import with_engine

OVERRIDE = re.compile(r"(?<![\w.$-])((?:[a-z_]+)(?:\.[a-z_0-9]+)*=(?:'[^']*'|\[[^\]]*\]|\{[^}]*\}|[^\s,;()]+))")

# (id, the refused command line's overrides); qwen3_dflash runs on a GPU Slurm cluster, smoke locally
CASES = [
    ("zero-spec-tokens", ["recipe=qwen3_dflash", "draft.num_speculative_tokens=0"]),
    ("baseline-without-draft", ["recipe=smoke", "draft=none", "sweep.baseline=true"]),
    ("speedup-gate-without-baseline", ["recipe=smoke", "+bench.gates.min_speedup.mtbench=1.2"]),
    ("ep-not-tp-times-dp", ["recipe=qwen3_dflash", "parallel.tp=2", "parallel.ep=3"]),
    ("draft-tp", ["recipe=qwen3_dflash", "parallel.tp=4", "parallel.draft_tp=2"]),
    ("tp-exceeds-gpus-per-node", ["recipe=qwen3_dflash", "parallel.tp=8"]),
    ("nodes-not-tp", ["recipe=qwen3_dflash", "cluster.nodes=2"]),
    ("tp-on-cpu", ["recipe=smoke", "parallel.tp=2"]),
    ("zero-dp", ["recipe=smoke", "parallel.dp=0"]),
    ("container-scope-job-multinode", ["recipe=qwen3_dflash", "cluster.nodes=2", "parallel.tp=8",
                                       "cluster.container_scope=job"]),
    ("zero-time", ["recipe=smoke", "cluster.time_min=0"]),
    ("empty-temperatures", ["recipe=smoke", "sweep.temperatures=[]"]),
    ("empty-concurrencies", ["recipe=smoke", "sweep.concurrencies=[]"]),
    ("empty-datasets", ["recipe=smoke", "sweep.datasets=[]"]),
    ("per-c-needs-phases", ["recipe=smoke", "bench.aiperf_mode=point", "+sweep.num_requests_per_concurrency={1:2}"]),
    ("zero-repeats", ["recipe=smoke", "sweep.repeats=0"]),
    ("good-share-without-limit", ["recipe=smoke", "sweep.slo.good_share=0.9"]),
    ("slo-with-disagg", ["recipe=smoke", "topology=disagg", "sweep.slo.ttft_ms=500"]),
    ("empty-server-command", ["recipe=smoke", "server.command=''"]),
    ("disagg-parity-without-disagg", ["recipe=smoke", "bench.disagg_parity=true"]),
    ("disagg-on-sglang", ["recipe=smoke", "engine=sglang", "topology=disagg"]),
    ("disagg-dp", ["recipe=smoke", "topology=disagg", "parallel.dp=2"]),
    ("unknown-aiperf-mode", ["recipe=smoke", "bench.aiperf_mode=fast"]),
]


def suggested(fix: str) -> list[str]:
    """The overrides a fix names, as a user would type them (`set a=1 b=2 on ...`: together)."""
    out = []
    for clause in re.split(r",? or |, (?=use |set )|\(", fix or ""):
        found = [m.rstrip(".:") for m in OVERRIDE.findall(clause) if "<" not in m]
        if found:
            out.append(found)
    return out


def errors(args: list[str]):
    try:
        return [e for e in validate(*with_engine(compose_recipe(args)))]
    except UserError as e:
        return [e]


@pytest.mark.parametrize("cid,args", CASES, ids=[c[0] for c in CASES])
def test_each_suggested_override_works(cid, args, recipe_env, tmp_path):
    base = [f"output_dir={tmp_path}", *args]
    errs = errors(base)
    assert errs, f"{cid}: {args} is not refused"
    tried = 0
    for e in errs:
        for fix in suggested(e.fix):
            tried += 1
            after = errors([*base, *fix])
            assert not after, f"{e.line()}\n  typed {fix}: still refused: {[x.line() for x in after]}"
    assert tried, f"{cid}: no typed override in {[e.line() for e in errs]}"


def test_narrowing_a_recipes_concurrencies_is_not_an_error(recipe_env, tmp_path, capsys):
    """recipe=gpu_8b holds {1: 16, 4: 32, 16: 64}: its entry for 16 merges into any override."""
    from launcher.login import cli

    for narrow in (["sweep.concurrencies=[1,4]"], ["sweep.concurrencies=[1,4]", "sweep.num_requests_per_concurrency={1:16,4:32}"]):
        rc = cli.main([f"output_dir={tmp_path}", "recipe=gpu_8b", *narrow, "dry_run=true"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert "sweep.num_requests_per_concurrency: ignored for C=16 (not in sweep.concurrencies [1, 4])" in out
    from launcher.login.plan import make_plan
    plan = make_plan(*with_engine(compose_recipe([f"output_dir={tmp_path}", "recipe=gpu_8b", "sweep.concurrencies=[1,4]"])))
    assert {j.bench.requests_per_concurrency.get(16) for j in plan.jobs} == {None}  # the job spec holds C=1 and 4 only
    assert {tuple(sorted(j.bench.requests_per_concurrency)) for j in plan.jobs} == {(1, 4)}
