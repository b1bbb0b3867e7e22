"""The command line of the speedup analysis:

    python -m launcher.speedup RESULTS_DIR [RESULTS_DIR ...] [--job JOB_DIR] [--at-al AL ...] [--slo ...]
        [--gpu-hour-price USD] [--per-user-speed TOK_S ...]

One folder is analysed (launcher.speedup.analysis) and printed (launcher.speedup.console);
several are each analysed, then compared across (launcher.speedup.across).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from launcher.results.job_dir import load_results, ResultsError
from launcher.results.store import write_json_atomic
from launcher.speedup import across, comparison_plot, fleet_cli
from launcher.speedup import slo as slo_mod
from launcher.speedup.analysis import SCHEMA_VERSION, SLO_FILE, write_all, write_slo
from launcher.speedup.console import print_analysis, print_slo


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.speedup", description="Pair each speculative point with its baseline point and write the speedups.")
    ap.add_argument("results", nargs="+",
                    help="the recipe's results folder (results/<recipe>); several folders (recipes, machines): each "
                         "analysed, then one comparison across them: drafters side by side, between-machine spread")
    ap.add_argument("--job", default=None, help="update only this job's summary.json (one results folder)")
    ap.add_argument("--out", default=None, metavar="FILE.json",
                    help="write the comparison (one folder or several) here, and beside it FILE.png (speedup "
                         "against AL, one line per drafter and machine, one panel per concurrency)")
    ap.add_argument("--slo", default=None, metavar="KEY=VALUE,...",
                    help="judge every point against this SLO (ttft_ms, itl_ms or tpot_ms, e2e_ms, percentile, "
                         "good_share; e.g. ttft_ms=300,tpot_ms=40); default: the recipe's sweep.slo (docs/slo.md)")
    ap.add_argument("--slo-tie", type=float, default=slo_mod.TIE_REL, metavar="REL",
                    help="goodputs within this relative difference (or within the repeats' MAD) are a tie, "
                         f"which goes to the simpler configuration (default {slo_mod.TIE_REL:g})")
    ap.add_argument("--at-al", type=float, nargs="+", default=None, metavar="AL",
                    help="predict each configuration's speedup at these acceptance lengths from its forced runs "
                         "(each request's prefill and verify steps), with a 95%% interval that says what it "
                         "rests on (docs/speedup.md)")
    fleet_cli.add_arguments(ap)
    args = ap.parse_args(argv)
    opts, bad = fleet_cli.options(args)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    if len(args.results) > 1:
        if args.job:
            print("error: --job updates one job's summary: give one results folder with it", file=sys.stderr)
            return 2
        return several(args)
    try:
        res = write_all(Path(args.results[0]), Path(args.job) if args.job else None, fleet_options=opts)
        slo_res = write_slo(Path(args.results[0]), args.slo, args.slo_tie) if args.job is None else None
    except (ResultsError, OSError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    if slo_res is not None:
        print_slo(slo_res, Path(args.results[0]) / SLO_FILE)
    print_analysis(Path(args.results[0]), res, args.at_al)
    if args.out and res is not None and args.job is None:  # one folder's comparison: its drafters, levels, costs
        root = Path(args.results[0])
        compare([(str(root), across.folder_machine(load_results(root)) or f"folder:{root}", res)], args.out)
    return 0


def several(args) -> int:
    """Each folder analysed (a folder without its baseline borrows one another folder ran on the
    same machine for the same target and serving settings), then one comparison across them."""
    roots = [Path(r) for r in args.results]
    opts, _ = fleet_cli.options(args)  # checked by main
    analyses = []
    try:
        loaded = {str(r): load_results(r) for r in roots}
        for r in roots:
            others = {k: v for k, v in loaded.items() if k != str(r)}
            res = write_all(r, borrowed=across.borrowable(loaded[str(r)], others), jobs=loaded[str(r)],
                            fleet_options=opts)
            print_analysis(r, res, args.at_al)
            if res is not None:
                analyses.append((str(r), across.folder_machine(loaded[str(r)]) or f"folder:{r}", res))
    except (ResultsError, OSError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    compare(analyses, args.out)
    return 0


def compare(analyses: list[tuple[str, str, dict]], out_file: Optional[str]) -> None:
    """The comparison across analysed folders (one or more): printed, and with ``out_file`` written
    with its plot beside it."""
    comp = across.comparison(analyses)
    legend = across.machine_names([(f, m) for f, m, _ in analyses])
    comp["machines"] = {name: {"machine": mach, "folders": [f for f, m, _ in analyses if m == mach],
                               "measured_on": next(res["measured_on"] for f, m, res in analyses if m == mach)}
                        for mach, name in legend.items()}
    print(f"comparison of {len(analyses)} folder(s) on {len(legend)} machine(s):")
    for line in across.lines(comp, legend):
        print(f"  {line}")
    if out_file:
        out = Path(out_file)
        write_json_atomic(out, {"schema_version": SCHEMA_VERSION, **comp})
        plot = comparison_plot.draw(comp, legend, out.with_suffix(".png"))
        print(f"comparison: {out}" + (f", {plot}" if plot else ""))
