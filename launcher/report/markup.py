"""The HTML pieces every section of the report uses: an escaped value, a number, a signed
percentage, a row of figures."""
from __future__ import annotations

from html import escape
from typing import Any, Iterable


def esc(v: Any) -> str:
    return escape("" if v is None else str(v))


def pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1%}"


def num(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def figures(figs: Iterable[tuple[str, str, bool]]) -> str:
    """(relative image path, caption, full width?) triples as a wrapping row of figures."""
    items = [f'<figure{" class=wide" if wide else ""}><img src="{esc(src)}" alt="{esc(cap)}">'
             f'<figcaption>{esc(cap)}</figcaption></figure>' for src, cap, wide in figs]
    return f'<div class="figs">{"".join(items)}</div>' if items else '<p class="sub">No complete points to plot.</p>'
