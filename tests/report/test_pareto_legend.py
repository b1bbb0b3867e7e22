"""issue 53 item 6: the Pareto plot's legend sits off the data: its box meets no panel's."""
from __future__ import annotations

from launcher.report import plots
from launcher.results.job_dir import load_results
from tests.speedup.recorded import DFLASH, results_copy


def test_the_pareto_legend_meets_no_panel(tmp_path, monkeypatch):
    root = results_copy(DFLASH, tmp_path / "r")
    series = {j.name: [p for p in j.points if p.ok] for j in load_results(root)}
    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig) or path)
    assert plots.throughput_pareto(series, tmp_path / "pareto.png") is not None
    fig = figs[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    box = legends[0].get_window_extent(renderer)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), (box, ax.get_window_extent(renderer))
    texts = legends[0].get_texts()
    assert {t.get_text() for t in texts} >= {f"{name} · T=0" for name in series} | {"Pareto-optimal"}
