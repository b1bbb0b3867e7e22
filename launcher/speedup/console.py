"""One folder's speedup analysis as the console prints it (launcher.speedup.cli calls it)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from launcher.engines.forced_acceptance import label
from launcher.results.identity import tag
from launcher.speedup import at_al, break_even, fleet_text, held_out
from launcher.speedup.analysis import SUMMARY_FILE
from launcher.speedup.causes import MACHINE_WORDS, UNRECORDED, words as cause_words
from launcher.speedup.decompose import cost_text, decode_cost_text


def print_analysis(root: Path, res: Optional[dict], at_als: Optional[list[float]]) -> None:
    """One folder's speedups as the console prints them."""
    if res is None:
        print(f"{root}: no baseline job (run the recipe with sweep.baseline=true); no speedups written")
        return
    print(f"speedup: {len(res['points'])} point(s) against the baseline; {root / SUMMARY_FILE}")
    print(f"  measured on: {res['measured_on']}")
    for src in sorted({r["baseline_from"] for r in res["points"] if r.get("baseline_from")}):
        print(f"  baseline borrowed from {src}: the same machine, target and serving settings")
    unknown = sum(1 for r in res["points"] if "same_machine" in r and r["same_machine"] is None)
    if unknown:
        print(f"  machine: {UNRECORDED.format(n=unknown)}")
    for said in dict.fromkeys(c["sentence"] for r in res["points"] if r.get("same_machine") is False
                              for c in r.get("causes") or [] if c["word"] in MACHINE_WORDS):
        print(f"  machine: {said}")
    drafts = {c.get("draft") for c in res["best_k"]}
    for c in res["best_k"]:
        sp = c["speedup"]
        who = (f" [{Path(c['draft']).name}]" if len(drafts) > 1 and c.get("draft") else "") \
            + tag((c.get("configuration") or {}).get("label"))
        print(f"  {c['dataset']} T={c['temperature']:g} C={c['concurrency']}{who}: best k={c['k']} "
              f"({c['output_tps']:.1f} tok/s, speedup {'-' if sp is None else f'{sp:.2f}'}x, "
              f"beats baseline: {c['beats_baseline']})" + (f" {c['suspect']}" if c.get("suspect") else ""))

    for f in res.get("forced") or []:
        sp, al, srv = f["speedup"], f["measured_al"], f["server_al"]
        print(f"  {label(f['forced'])} k={f['k']}{tag((f.get('configuration') or {}).get('label'))}: {f['dataset']} T={f['temperature']:g} C={f['concurrency']}: "
              f"measured AL {'-' if al is None else f'{al:.3f}'} (server {'-' if srv is None else f'{srv:.3f}'}), "
              f"{f['output_tps']:.1f} tok/s, speedup {'-' if sp is None else f'{sp:.2f}'}x")
    for b in res.get("break_even") or []:
        print(f"  {break_even.one_line(b)}")
    for r in res["points"]:  # why: speedup = AL / step cost, and the causes (launcher.speedup.why)
        d = r.get("decomposition")
        if d:
            print(f"  why {r['drafter']}: {r['dataset']} T={r['temperature']:g} C={r['concurrency']}: "
                  f"{d['speedup']:.2f}x = AL {d['al']:.2f} / step cost {cost_text(d)}"
                  + (f" (decode only {decode_cost_text(d)})" if d.get("decode_step_cost") else "")
                  + f"; {cause_words(r.get('causes') or [])}")
    for m in res.get("measured_vs_predicted") or []:
        print(f"  {at_al.comparison_line(m)}")
    checks = res.get("held_out") or []  # each forced level predicted from the others (launcher.speedup.held_out)
    if checks:
        print(f"  held out: {held_out.summary(checks)}")
    for h in checks:
        print(f"  held out {held_out.line(h)}")
    for line in (at_al.lines(res.get("step_costs") or [], at_als, res["points"]) if at_als else []):
        print(f"  at AL: {line}")
    for line in fleet_text.lines(res.get("fleet")):  # at equal per-user speed (launcher.speedup.fleet)
        print(f"  {line}")


def print_slo(res: dict, path: Path) -> None:
    print(f"at the SLO ({res['description']}): {path}")
    ag = res["goodput_agrees_with_aiperf"]
    if ag["points_compared"]:
        print(f"  goodput agrees with AIPerf's on {ag['agree']} of {ag['points_compared']} point(s)")
    for g in res["groups"]:
        print(f"  {g['dataset']} T={g['temperature']:g}:")
        for c in g["configs"]:
            curve = ", ".join(f"C={p['concurrency']}: {p['goodput_rps']:.2f}" + ("" if p["verdict"] == "met" else
                                                                               f" ({p['verdict']})")
                              + (" (schedule not applied)" if (p.get("schedule_check") or {}).get("applied") is False
                                 else "")
                              for p in c["points"] if p["goodput_rps"] is not None)
            print(f"    {c['label']:>9}: max concurrency {c['max_concurrency']} ({c['max_load_note']}); "
                  f"goodput req/s {curve}")
        for r in g["recommendation"]:
            span = f"{r['from']}+" if r["to"] is None else (f"{r['from']}" if r["to"] == r["from"]
                                                            else f"{r['from']}-{r['to']}")
            print(f"    load {span}: {r['label']}" + (f" ({r['note']})" if r.get("note") else "")
                  + (f" {r['suspect']}" if r.get("suspect") else ""))
