"""HTML for the report: a single static page with inline CSS, no scripts, and
images referenced by relative paths so it opens straight from disk."""
from __future__ import annotations

from typing import Any, Iterable

from launcher.contracts.server_ready import read_server_ready
from launcher.report.golden_section import golden_block
from launcher.report.lossless_section import lossless_block
from launcher.report.markup import esc as _e, figures, num as _num, pct as _pct
from launcher.results import EXTENSION_KEY
from launcher.results.disagg_parity import acceptance_check, read_parity
from launcher.results.identity import (configuration_label, folder_labels, forced as forced_words, identity,
                                       run_identity, tag)
from launcher.results.job_dir import Job, Point
from launcher.results.summary import PointRow, as_row
from launcher.results.repeats.record import FAILED_OVER_REPEATS_WORDS, failed_over_repeats
from launcher.runtime.machine import machines_line
from launcher.report.marks import FEW, IMPOSSIBLE, KNOWN_DEFECT, LEGEND, NOISY, point_marks
from launcher.runtime.source import UNKNOWN_COMMIT

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1240px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:1.6em;margin:.2em 0}
h2{font-size:1.3em;border-bottom:2px solid #d8dce3;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin:1.4em 0 .5em}
.sub{color:#5b6475;font-size:.9em}
.card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:14px 18px;margin:12px 0}
.figs{display:flex;flex-wrap:wrap;gap:14px}
.figs figure{margin:0;background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:8px;flex:1 1 520px}
.figs figure.wide{flex-basis:100%}
.figs img{max-width:100%;height:auto;display:block;margin:0 auto}
.figs figcaption{font-size:.82em;color:#5b6475;margin-top:4px}
dl.prov{display:grid;grid-template-columns:max-content 1fr;gap:4px 18px;margin:0}
dl.prov dt{font-weight:600;color:#465064}
dl.prov dd{margin:0;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;word-break:break-all}
table{border-collapse:collapse;width:100%;font-size:.86em;background:#fff}
th,td{border:1px solid #dde1e8;padding:4px 7px;text-align:right;vertical-align:top}
th{background:#eef1f5;position:sticky;top:0}
td.l,th.l{text-align:left}
tr.bad td{background:#fdecec}
.st-complete{color:#17803d;font-weight:600}.st-skipped{color:#2f6bb3;font-weight:600}
.st-failed,.st-unknown{color:#b42318;font-weight:700}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:700;color:#fff}
.pass{background:#17803d}.fail{background:#b42318}.none{background:#8a93a3}
.warn{color:#b45309}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:10px}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f4f7;border-radius:6px;padding:8px;margin:4px 0;
    max-height:18em;overflow:auto;font-size:.85em}
mark{background:#ffd9a8}
.ids{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.82em}
.ids b{background:#ffd9a8;padding:0 2px}
details summary{cursor:pointer;font-weight:600}
"""


# ------------------------------------------------------------------ provenance

def _distinct(values: Iterable[Any]) -> str:
    seen: list[str] = []
    for v in values:
        s = "" if v is None else str(v)
        if s and s not in seen:
            seen.append(s)
    return " | ".join(seen)


def provenance(job: Job) -> list[tuple[str, str]]:
    """(label, value) rows; values differing across points are joined with ' | '."""
    cfgs = [p.configuration for p in job.points if p.configuration] or [{}]
    s = job.summary
    ext = [c.get(EXTENSION_KEY) or {} for c in cfgs]
    serving = [c.get("serving_config") or {} for c in cfgs]

    def pick(*vals):
        return _distinct(vals)

    idents = [identity(job, p) for p in job.points]  # what was measured: launcher.results.identity
    gpu = _distinct(c.get("gpu") for c in cfgs)
    ngpu = _distinct(p.num_gpus for p in job.points)
    rows = [
        ("recipe / server_id", pick(s.get("recipe")) + " / " + pick(s.get("server_id"), *(sv.get("server_id") for sv in serving))),
        ("model", _distinct(i.model for i in idents)),
        ("draft", _distinct(i.draft for i in idents if i.draft not in ("-", "none")) or "–"),
        ("method", _distinct(i.method for i in idents)),
        ("k (num_speculative_tokens)", _distinct(i.k for i in idents) or "–"),
        ("forced acceptance", _distinct(i.forced for i in idents) or "no (the draft's own acceptance)"),
        ("server configuration", _distinct(_serving(i.run) for i in idents)),
        ("engine", _distinct(f"{c.get('engine') or ''} {c.get('engine_version') or s.get('engine_version') or ''}".strip()
                             for c in cfgs)),
        ("container image", _distinct(c.get("container_image") for c in cfgs)),
        ("GPU", f"{gpu} × {ngpu}" if gpu and ngpu else gpu),
        ("GPU memory (peak)", _telemetry(job.telemetry)),
        ("machine (over the points)", machines_line(p.machine for p in job.points)),
        ("tool version / git", pick(*(e.get("tool_version") for e in ext)) + " / "
         + pick(*(e.get("git_sha") or (UNKNOWN_COMMIT if e.get("tool_version") else None) for e in ext))),
        ("python", _distinct(c.get("python_version") for c in cfgs)),
        ("timestamps (UTC)", _span(i.timestamp for i in idents)),
        ("wall time / server start", f"{_num(s.get('wall_time_s'), 1)} s / {_num(s.get('server_startup_s'), 1)} s"),
        ("folder", str(job.path)),
    ]
    return rows


def _serving(run) -> str:
    """The server's settings in one line, after their fingerprint (launcher.contracts.run_identity)."""
    settings = " ".join(f"{f} {v}".strip() for f, v in run.serving.items())
    return f"{run.fingerprint}: {settings or 'no settings recorded'}"


def _span(values: Iterable[Any]) -> str:
    vs = sorted(str(v) for v in values if v)
    if not vs:
        return ""
    return vs[0] if vs[0] == vs[-1] else f"{vs[0]} … {vs[-1]}"


def _telemetry(t: dict | None) -> str:
    if not t:
        return "not recorded"
    if not t.get("available"):
        return f"unavailable ({t.get('reason') or 'no reason given'})"
    parts = [f"GPU{g.get('index')} {g.get('name') or ''}: {_num(g.get('peak_used_gib'))} / {_num(g.get('total_gib'), 0)} GiB"
             for g in t.get("gpus") or []]
    if t.get("kv_cache_cap_gib") is not None:
        parts.append(f"KV cap {_num(t.get('kv_cache_cap_gib'))} GiB")
    return "; ".join(parts) or "no GPUs listed"


def recorded_server_argv(job: Job) -> list:
    """The server argv the job ran, as it recorded it: a point's configuration.json, else the job's
    server_ready.json ([] when neither holds one: the report never rebuilds it)."""
    argv = (job.configuration.get("serving") or {}).get("server_argv")
    if argv:
        return list(argv)
    ready = read_server_ready(job.path)
    return list(ready.argv) if ready else []


def provenance_block(job: Job) -> str:
    items = []
    for label, value in provenance(job):
        missing = not value.strip(" /|–")
        val = '<span class="warn">not recorded</span>' if missing else _e(value)
        items.append(f"<dt>{_e(label)}</dt><dd>{val}</dd>")
    cfg = job.configuration
    extra = []
    argv = recorded_server_argv(job)
    if argv:
        extra.append(f"<details><summary>server argv</summary><pre>{_e(' '.join(map(str, argv)))}</pre></details>")
    rp = (cfg.get("run_args") or {}).get("runtime_params")
    if rp:
        extra.append(f"<details><summary>runtime params</summary><pre>{_e(rp)}</pre></details>")
    return f'<div class="card"><dl class="prov">{"".join(items)}</dl>{"".join(extra)}</div>'


# ------------------------------------------------------------------ tables

_COLS = [("point", "l"), ("status", "l"), ("reason", "l"), ("Average_AL", ""), ("Server_AL", ""),
         ("Prometheus_AL", ""), ("Output TPS", ""), ("TPS/gpu", ""), ("TTFT p50 ms", ""),
         ("decode tok/s p50", ""), ("failed req", ""), ("bench s", ""), ("per-position rates", "l")]


def _row(job: Job, p: Point) -> str:
    bench_s = p.row.benchmark_duration_s
    if bench_s is None and p.result:
        bench_s = p.result.tim_ext.get("duration_s")
    failed_req = (p.row.failed_requests if "failed_requests" in p.row.held
                  else p.result.failed_requests if p.result else None)
    failed_req = failed_over_repeats(p.row.repeats) or failed_req  # every repeat's, not only the held one's
    forced = forced_words(job, p)  # launcher.results.identity
    rates = p.result.per_position_rates if p.result else None
    forced_tag = f' <span class="st-failed">{_e(forced.upper())}</span>' if forced else ""
    mk = point_marks(p)
    if mk.impossible:
        forced_tag += f' <span class="st-failed" title="{_e(mk.impossible)}">{IMPOSSIBLE} IMPOSSIBLE AL</span>'
    if mk.suspect:
        word = "KNOWN DEFECT" if mk.suspect_mark == KNOWN_DEFECT else "SUSPECT T"
        forced_tag += f' <span class="st-failed" title="{_e(mk.suspect)}">{mk.suspect_mark} {word}</span>'
    tps_cell = _num(p.output_tps, 1)
    if mk.tps is not None:
        tps_cell = (f"{mk.tps.mean:.1f} ±{(mk.tps.hi - mk.tps.lo) / 2:.1f} (n={mk.tps.n})"
                    + (f" {NOISY} noisy" if mk.noisy else ""))
    few = lambda v, stat: v + (f" {FEW}" if stat in mk.few else "")  # noqa: E731
    cells = [
        ("l", _e(p.dir)), ("l", f'<span class="st-{_e(p.status)}">{_e(p.status)}</span>{forced_tag}'),
        ("l", _e(p.reason or ("result files missing" if not p.ok and p.status != "failed" else ""))),
        ("", _num(p.average_al, 3)), ("", _num(p.server_al, 3)), ("", _num(p.prometheus_al, 3)),
        ("", tps_cell), ("", _num(p.output_tps_per_gpu, 1)), ("", few(_num(p.ttft_p50_ms, 1), "TTFT Time")),
        ("", few(_num(p.decode_tps_p50, 1), "Request Generation Tokens Per Second")), ("", _e(failed_req if failed_req is not None else "–")),
        ("", _num(bench_s, 2)),
        ("l", _e(", ".join(f"{r:.4f}" for r in rates)) if rates else "–"),
    ]
    tds = "".join(f'<td class="{c}">{v}</td>' for c, v in cells)
    return f'<tr{"" if p.ok else " class=bad"}>{tds}</tr>'


def points_table(job: Job) -> str:
    head = "".join(f'<th class="{c}">{_e(n)}</th>' for n, c in _COLS)
    return (f'<table><thead><tr>{head}</tr></thead><tbody>{"".join(_row(job, p) for p in job.points)}</tbody></table>'
            f'<p class="sub">Output TPS with repeats: mean ± the 95% half-interval (n repeats); '
            f'{_e(FAILED_OVER_REPEATS_WORDS)}. {_e(LEGEND)}.</p>')


def jobs_table(jobs: list[Job]) -> str:
    rows = []
    labels = folder_labels(jobs)  # two server configurations in the folder: each job says what its server changes
    for j in jobs:
        prov = dict(provenance(j))
        conf = tag(configuration_label(run_identity(j), labels))
        ok = sum(p.ok for p in j.points)
        als = [p.average_al for p in j.points if p.ok and p.average_al is not None]
        rows.append(
            f'<tr><td class="l"><a href="#{_e(anchor(j))}">{_e(j.name)}</a>{_e(conf)}</td><td class="l">{_e(prov["model"])}</td>'
            f'<td class="l">{_e(prov["draft"])}</td><td class="l">{_e(prov["method"])}</td>'
            f'<td>{_e(prov["k (num_speculative_tokens)"])}</td><td>{ok} / {len(j.points)}</td>'
            f'<td>{_num(max(als), 3) if als else "–"}</td>'
            f'<td class="l">{_e(_lossless_word(j.summary.get("lossless")))}</td>'
            f'<td class="l">{_e(_known_word(j.summary.get("known_answer")))}</td></tr>')
    head = "".join(f'<th class="{c}">{n}</th>' for n, c in [
        ("job", "l"), ("model", "l"), ("draft", "l"), ("method", "l"), ("k", ""), ("complete", ""),
        ("best Average_AL", ""), ("lossless", "l"), ("known answer", "l")])
    return f'<table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _known_verdict(e: dict) -> str:
    """A temperature's verdict cell: a failure a documented defect explains is named, with its page."""
    if e.get("passed"):
        return "pass"
    kd = e.get("known_defect") if isinstance(e.get("known_defect"), dict) else None
    if kd:
        return (f'<b>FAIL: <span class="known-defect">{_e(kd.get("line"))}</span></b>'
                f'<br><span class="sub">{_e(kd.get("what"))}</span>')
    return "<b>FAIL: engine defect suspected</b>"


def known_answer_block(known: dict | None, points: list | None = None) -> str:
    """summary.json's known-answer probe: the target as its own draft must accept
    every draft (AL = k + 1) at each temperature; a failure marks that temperature's
    points (``points``: summary rows, PointRow or as summary.json holds them) as measuring
    an engine defect."""
    if not isinstance(known, dict):
        return ('<div class="card"><span class="badge none">NOT RUN</span> '
                '<span class="sub">No known-answer probe in summary.json (bench.known_answer=true runs it).</span></div>')
    if known.get("passed") is None:
        return (f'<div class="card"><span class="badge none">{_e(str(known.get("status") or "no verdict").upper())}'
                f'</span> {_e(known.get("reason", ""))}</div>')
    badge = '<span class="badge pass">PASSED</span>' if known["passed"] else '<span class="badge fail">FAILED</span>'
    rows = "".join(
        f'<tr><td>{_num(e.get("temperature"), 2)}</td><td>{_num(e.get("al"), 3)}</td><td>{_e(e.get("expected_al"))}</td>'
        f'<td class="l">{_e(e.get("histogram"))}</td><td>{_e(e.get("short_steps"))} / {_e(e.get("steps"))}</td>'
        f'<td class="l">{_known_verdict(e)}</td></tr>'
        for e in known.get("temperatures", []))
    head = "".join(f'<th class="{c}">{n}</th>' for n, c in [
        ("T", ""), ("AL", ""), ("expected (k+1)", ""), ("histogram (steps accepting 0..k)", "l"),
        ("short steps / steps", ""), ("verdict", "l")])
    warned = [p for p in map(as_row, (p for p in points or [] if isinstance(p, (dict, PointRow)))) if p.engine_warning]
    warn = ""
    if warned:
        warn = (f'<p class="warn">{len(warned)} point(s) measured at a temperature where the probe failed: '
                f'{_e(warned[0].engine_warning)}; their acceptance figures reflect the engine, not the draft: '
                + ", ".join(_e(p.dir) for p in warned) + "</p>")
    return (f'<div class="card">{badge} the target as its own draft (k={_e(known.get("k"))}) '
            f'must accept every draft at every temperature</div>'
            f'<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{warn}')


def _known_word(known: Any) -> str:
    if not isinstance(known, dict):
        return "not run"
    if known.get("passed") is None:
        return str(known.get("status") or "unknown")
    if known["passed"]:
        return "passed"
    return "FAILED at T=" + ", ".join(f"{t:g}" for t in known.get("failed_temperatures", []))


def _lossless_word(lossless: Any) -> str:
    if not isinstance(lossless, dict):
        return "not run"
    return {True: "passed", False: "FAILED"}.get(lossless.get("passed"), str(lossless.get("status") or "unknown"))


def anchor(job: Job) -> str:
    return "job-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in job.name)


# ------------------------------------------------------------------ page

def disagg_block(parity: dict | None) -> str:
    """topology=disagg with bench.disagg_parity: the verdict and both topologies side by side."""
    if not isinstance(parity, dict):
        return ""
    v = parity.get("verdict")
    badge = {"pass": "pass", "fail": "fail"}.get(v, "none")
    checks = parity.get("checks") or {}
    tol = parity.get("al_tolerance") or 0.0
    head = (f'<div class="card"><span class="badge {badge}">{_e(str(v).upper())}</span> '
            f"T=0 outputs equal: {_e(checks.get('outputs_equal_at_t0'))} · acceptance per drafted step within "
            f"{tol:.0%}: {_e(acceptance_check(checks))} · "
            f"every request transferred: {_e(checks.get('every_request_transferred'))}</div>")
    rows = []
    for p in parity.get("points") or []:
        d, a, kv = p.get("disagg") or {}, p.get("aggregated") or {}, p.get("kv_transfer") or {}
        cells = [p.get("point"), _num(d.get("Average_AL"), 3), _num(a.get("Average_AL"), 3),
                 _num(d.get("TTFT median s"), 3), _num(a.get("TTFT median s"), 3),
                 _num(d.get("Decode tok/s median"), 1), _num(a.get("Decode tok/s median"), 1),
                 _num(d.get("Output TPS"), 1), _num(a.get("Output TPS"), 1),
                 f"{kv.get('external_kv_transfer_tokens', '?')} / {kv.get('prompt_tokens', '?')}",
                 p.get("outputs_equal"), p.get("extra_verify_steps_per_turn"),
                 _num((p.get("per_step_al") or {}).get("disagg"), 3), _num((p.get("per_step_al") or {}).get("aggregated"), 3),
                 _pct(p.get("structural_step_cost"))]
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    hdr = ("point", "AL disagg", "AL aggregated", "TTFT disagg s", "TTFT aggregated s", "decode tok/s disagg",
           "decode tok/s aggregated", "Output TPS disagg", "Output TPS aggregated", "prompt tokens transferred",
           "T=0 outputs equal", "extra verify steps / turn", "AL per drafted step disagg",
           "AL per drafted step aggregated", "post-transfer step's cost on AL")
    probs = "".join(f"<li>{_e(x)}</li>" for x in parity.get("problems") or [])
    return (f"<h3>Disaggregated vs aggregated</h3>{head}<table><tr>"
            + "".join(f"<th>{_e(h)}</th>" for h in hdr) + "</tr>" + "".join(rows) + "</table>"
            + (f"<ul>{probs}</ul>" if probs else ""))


def _disagg_figure(p: Point, key: str) -> dict | None:
    """A disaggregated point's figure (prefix_cache, ttft_split): its configuration.json, else its row."""
    ext = ((p.configuration or {}).get(EXTENSION_KEY) or {}) if p.configuration else {}
    return ext.get(key) or (p.row.extra.get(key) if p.row else None) or None


def prefix_cache_block(job: Job) -> str:
    """topology=disagg: each server's prefix-cache hits over each point (tokens found / looked
    up), under the router's policy: where it sent a conversation's later turns."""
    rows, servers = [], []
    for p in job.points:
        w = _disagg_figure(p, "prefix_cache")
        if not isinstance(w, dict):
            continue
        for s in w.get("servers") or []:
            if s.get("server") not in servers:
                servers.append(s.get("server"))
        rows.append((p.dir, w))
    if not rows:
        return ""
    hdr = ["point", "router policy", *[f"{s} hits / queries" for s in servers], "prefill hit rate"]
    body = []
    for point, w in rows:
        by = {s.get("server"): s for s in w.get("servers") or []}
        cells = [point, w.get("router_policy") or "?",
                 *[f"{by[s]['hits']} / {by[s]['queries']}" if s in by else "-" for s in servers],
                 f"{w['prefill_hit_rate']:.1%}" if w.get("prefill_hit_rate") is not None else "-"]
        body.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    return ("<h3>Prefix cache per server</h3><p>Tokens found in each server's prefix cache over the point, "
            "of those looked up: a conversation's later turns sent where its earlier turns were prefilled "
            "show as hits on that prefill server.</p><table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in hdr)
            + "</tr>" + "".join(body) + "</table>")


def ttft_split_block(job: Job) -> str:
    """topology=disagg: where each point's time to first token went, in mean ms (the engine's
    per-server histograms; launcher/bench/ttft_split.py)."""
    rows = [(p.dir, w) for p in job.points if isinstance(w := _disagg_figure(p, "ttft_split"), dict)]
    if not rows:
        return ""
    keys = ("client_ttft_ms", "prefill_queue_ms", "prefill_compute_ms", "prefill_server_ttft_ms", "kv_transfer_ms",
            "decode_server_ttft_ms", "router_and_http_ms")
    hdr = ["point", "client TTFT", "prefill queue", "prefill", "prefill server TTFT", "KV transfer",
           "decode server TTFT", "router and HTTP"]
    body = ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in
                             [point, *[f"{w[k]:.1f}" if w.get(k) is not None else "-" for k in keys]]) + "</tr>"
            for point, w in rows]
    return ("<h3>Time to first token, split (mean ms)</h3><p>Client TTFT = the prefill server's own TTFT "
            "(queue and prefill) + the decode server's own (its KV pull and first step) + the router's hops "
            "and HTTP. Means over the point's window from each server's histograms: the engine exposes no "
            "per-request split.</p><table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in hdr) + "</tr>"
            + "".join(body) + "</table>")


def job_section(job: Job, figs: list[tuple[str, str, bool]], heading: bool) -> str:
    left_out = [p for p in job.points if not p.ok]
    note = ""
    if left_out:
        note = (f'<p class="warn">Left out of the plots ({len(left_out)} point(s) not complete): '
                + ", ".join(_e(p.dir) for p in left_out) + "</p>")
    title = f'<h2 id="{_e(anchor(job))}">Job {_e(job.name)}</h2>' if heading else ""
    n_ok = sum(p.ok for p in job.points)
    return (f"<section>{title}<h3>Provenance</h3>{provenance_block(job)}"
            f"<h3>Lossless check</h3>{lossless_block(job.summary.get('lossless'))}"
            f"<h3>Golden reference</h3>{golden_block(job.summary.get('golden'))}"
            f"<h3>Known-answer probe</h3>"
            f"{known_answer_block(job.summary.get('known_answer'), [p.row for p in job.points])}"
            f"{disagg_block(read_parity(job.path))}{prefix_cache_block(job)}{ttft_split_block(job)}"
            f"<h3>Plots</h3>{note}{figures(figs)}"
            f"<h3>Points ({n_ok} of {len(job.points)} complete)</h3>{points_table(job)}</section>")


def forced_note(jobs: list[Job]) -> str:
    """At the top of the page: which jobs ran at a forced acceptance (vLLM's synthetic sampling),
    whose AL the server set; their points are left out of the acceptance plots."""
    levels: dict[str, set] = {}
    for j in jobs:
        for p in j.points:
            f = identity(j, p).forced
            if f:
                levels.setdefault(j.name, set()).add(f)
    if not levels:
        return ""
    which = "; ".join(f"{_e(name)}: {_e(', '.join(sorted(v)))}" for name, v in levels.items())
    return (f'<p class="warn" id="forced-note"><b>Forced acceptance: the acceptance length was set, not earned by '
            f"the draft.</b> {which} (vLLM's synthetic sampling). Their Average_AL and Server_AL are the level the "
            "server was set to; the acceptance plots (AL vs temperature, the histogram, Category_AL) leave "
            "their points out.</p>")


def page(title: str, subtitle: str, overview: str, sections: list[str]) -> str:
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width,initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
            f'<h1>{_e(title)}</h1><p class="sub">{_e(subtitle)}</p>{overview}{"".join(sections)}'
            "</main></body></html>\n")
