"""Put the report together: load the jobs, draw the figures, write index.html."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from launcher.report import html, plots
from launcher.report.fleet_section import fleet_section
from launcher.report.slo_section import slo_section
from launcher.report.speedup_section import speedup_section
from launcher.report.why_section import why_link, why_page
from launcher.results.identity import identity
from launcher.results.job_dir import Job, Point, load_results, read_json
from launcher.speedup.analysis import SLO_FILE, load_analysis


def earned(job: Job, points: list[Point]) -> list[Point]:
    """The points whose acceptance the draft earned: a forced point's Average_AL, Category_AL
    and histogram show only the level the server was set to (launcher.results.identity)."""
    return [p for p in points if not identity(job, p).forced]


def _job_figures(job: Job, out: Path, prefix: str) -> list[tuple[str, str]]:
    ok = [p for p in job.points if p.ok]
    mine = earned(job, ok)  # the acceptance plots: never a forced value drawn as if the draft had earned it
    series = {"": ok}
    drawn = sum(plots.drawable(p) for p in ok)
    made = [
        (plots.throughput_pareto(series, out / f"{prefix}pareto.png"),
         "Output TPS per GPU vs per-user decode speed; one curve per temperature, points labelled by concurrency; "
         f"ringed points are Pareto-optimal. {drawn} of {len(ok)} point(s) drawn.", True),
        (plots.al_vs_temperature({"": mine}, out / f"{prefix}al_vs_temperature.png"),
         "Average_AL per dataset against temperature.", False),
        (plots.pooled_histogram(mine, out / f"{prefix}acceptance_histogram.png"),
         "Acceptance_Length_Histogram summed over points, per temperature.", False),
        (plots.category_al(mine, out / f"{prefix}category_al.png"),
         "Category_AL per dataset and temperature (mean over concurrencies).", False),
    ]
    return _rel(made, out)


def _rel(made, out: Path) -> list[tuple[str, str, bool]]:
    return [(p.relative_to(out).as_posix(), cap, wide) for p, cap, wide in made if p is not None]


def _overview(jobs: list[Job], out: Path) -> str:
    series = {j.name: [p for p in j.points if p.ok] for j in jobs}
    made = [
        (plots.throughput_pareto(series, out / "overview_pareto.png"),
         "All jobs: Output TPS per GPU vs per-user decode speed (labels: concurrency).", True),
        (plots.al_vs_temperature({j.name: earned(j, series[j.name]) for j in jobs}, out / "overview_al_vs_temperature.png"),
         "All jobs: Average_AL against temperature.", False),
    ]
    figs = _rel(made, out)
    return f"<h2>Overview ({len(jobs)} jobs)</h2>{html.jobs_table(jobs)}<h3>Plots</h3>{html.figures(figs)}"


def _speedup(results_dir: Path, jobs: list[Job], out: Path) -> str:
    """The speedup section when the results hold a matched baseline, and the link to the "why" page."""
    analysis = load_analysis(results_dir, jobs)
    return why_link(why_page(analysis, out)) + speedup_section(analysis, out) + fleet_section(analysis, out)


def _slo(results_dir: Path, out: Path) -> str:
    """The "At your SLO" section when the results hold slo_summary.json (python -m launcher.speedup)."""
    res = read_json(results_dir / SLO_FILE)
    return slo_section(res if isinstance(res, dict) else None, out)


def build_report(results_dir: Path, out: Path | None = None) -> Path:
    """Write the report for ``results_dir`` (a job folder or a folder of them);
    returns the path of index.html. Raises load.ResultsError for unusable input."""
    results_dir = Path(results_dir)
    jobs = load_results(results_dir)
    out = Path(out) if out else results_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    multi = len(jobs) > 1
    sections = [html.job_section(j, _job_figures(j, out, f"job{i + 1}_" if multi else ""), heading=multi)
                for i, j in enumerate(jobs)]
    overview = html.forced_note(jobs) + (_overview(jobs, out) if multi else "") + _slo(results_dir, out) \
        + _speedup(results_dir, jobs, out)
    title = "Speculative decoding benchmark" + ("" if multi else f": {jobs[0].name}")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    index = out / "index.html"
    index.write_text(html.page(title, f"{results_dir.resolve()} · generated {stamp}", overview, sections))
    return index
