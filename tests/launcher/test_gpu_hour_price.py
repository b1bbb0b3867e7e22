"""Issue 62: the recipe's GPU-hour price (cluster.gpu_hour_price) reaches every job spec, the baseline's
too, and from there the fleet comparison of launcher.speedup; the command line's price wins; a price
that is not above 0 is one error line naming the field; no price is no price, never a default."""
from __future__ import annotations

from pathlib import Path

from launcher.contracts.job import JobSpec
from launcher.login.config.validate import validate
from launcher.login.plan import make_plan
from launcher.results.job_dir import Job
from launcher.speedup.fleet import CLI_PRICE, RECIPE_PRICE, Options, resolve
from tests.support.login import with_engine


def _jobs(plan) -> list[Job]:
    return [Job(Path(s.job_dir), {}, [], spec=s) for s in plan.jobs + [plan.baseline]]


def test_the_recipes_price_is_in_every_job_spec_and_the_fleet_takes_it(compose):
    plan = make_plan(*with_engine(compose("recipe=smoke", "sweep.baseline=true", "sweep.num_speculative_tokens=[1,3]",
                                          "cluster.gpu_hour_price=2.5")))
    specs = plan.jobs + [plan.baseline]
    assert len(specs) == 3 and {s.gpu_hour_price for s in specs} == {2.5}
    assert JobSpec.from_dict(specs[0].to_dict()).gpu_hour_price == 2.5  # job.json keeps it
    jobs = _jobs(plan)
    assert resolve(None, jobs) == Options(2.5, RECIPE_PRICE, ())
    assert resolve(Options(None, None, (80.0,)), jobs) == Options(2.5, RECIPE_PRICE, (80.0,))
    assert resolve(Options(4.0, CLI_PRICE), jobs) == Options(4.0, CLI_PRICE, ())  # the command line wins


def test_no_price_is_no_price(compose):
    plan = make_plan(*with_engine(compose("recipe=smoke", "sweep.baseline=true")))
    assert {s.gpu_hour_price for s in plan.jobs + [plan.baseline]} == {None}
    assert resolve(None, _jobs(plan)) == Options(None, None, ())


def test_a_price_not_above_zero_is_one_line_naming_the_field(compose):
    for bad in ("0", "-1.5"):
        errs = [e.line() for e in validate(*with_engine(compose("recipe=smoke", f"cluster.gpu_hour_price={bad}")))]
        (line,) = [e for e in errs if "gpu_hour_price" in e]
        assert line.startswith("cluster.gpu_hour_price:") and "e.g. cluster.gpu_hour_price=2.50" in line, line
