"""The report's lossless section: summary.json's lossless verdict and each recorded
mismatch, the two outputs highlighted from their first difference."""
from __future__ import annotations

from launcher.report.markup import esc


def _common_prefix(a: list | str, b: list | str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _marked_text(text: str, cut: int) -> str:
    return f"{esc(text[:cut])}<mark>{esc(text[cut:])}</mark>" if cut < len(text) else esc(text)


def _ids_window(ids: list, cut: int, before: int = 6, after: int = 6) -> str:
    lo = max(0, cut - before)
    shown = []
    for i in range(lo, min(len(ids), cut + after)):
        shown.append(f"<b>{esc(ids[i])}</b>" if i == cut else esc(ids[i]))
    if cut >= len(ids):
        truncated = bool(ids) and ids[-1] == "..."     # the check keeps only the first ids
        shown.append("<b>(not recorded)</b>" if truncated else "<b>(end)</b>")
    return ("… " if lo else "") + " ".join(shown) + (" …" if cut + after < len(ids) else "")


def _mismatch(i: int, m: dict) -> str:
    spec_t, ref_t = str(m.get("spec_text") or ""), str(m.get("ref_text") or "")
    cut = _common_prefix(spec_t, ref_t)
    spec_ids, ref_ids = list(m.get("spec_token_ids") or []), list(m.get("ref_token_ids") or [])
    ids_html = ""
    if spec_ids or ref_ids or isinstance(m.get("first_diff_token"), int):
        k = m["first_diff_token"] if isinstance(m.get("first_diff_token"), int) else _common_prefix(spec_ids, ref_ids)
        ids_html = (f'<p class="ids">first differing token: #{k}<br>'
                    f"speculative: {_ids_window(spec_ids, k)}<br>reference: {_ids_window(ref_ids, k)}</p>")
    return (f"<details{' open' if i == 0 else ''}><summary>mismatch {i + 1}: "
            f"{esc(str(m.get('prompt') or '')[:90])}</summary>"
            f"<pre>{esc(m.get('prompt'))}</pre>"
            f'<div class="pair"><div><b>speculative</b><pre>{_marked_text(spec_t, cut)}</pre></div>'
            f"<div><b>reference (no speculation)</b><pre>{_marked_text(ref_t, cut)}</pre></div></div>"
            f"{ids_html}</details>")


_LOSSLESS_KEYS = {"passed", "matches", "required", "prompts", "mismatches", "num_mismatches", "min_match_fraction"}


def lossless_block(lossless: dict | None) -> str:
    """summary.json's lossless block: verdict, counts, then each recorded mismatch
    with the two outputs from their first difference highlighted."""
    if not isinstance(lossless, dict):
        return ('<div class="card"><span class="badge none">NOT RUN</span> '
                '<span class="sub">No lossless check in summary.json.</span></div>')
    passed = lossless.get("passed")
    if passed is None:   # e.g. {"status": "pending reference run", "prompts": N}
        word = esc(lossless.get("status") or "no verdict")
        head = f'<span class="badge none">{word.upper()}</span> {esc(lossless.get("prompts", "?"))} prompts'
    else:
        badge = '<span class="badge pass">PASSED</span>' if passed else '<span class="badge fail">FAILED</span>'
        frac = lossless.get("min_match_fraction")
        head = (f"{badge} {esc(lossless.get('matches', '?'))} of {esc(lossless.get('prompts', '?'))} outputs "
                f"identical to the reference without speculation (required: {esc(lossless.get('required', '?'))}"
                + (f", more than {frac:.0%} of the prompts" if isinstance(frac, (int, float)) else "") + ")")
    mism = [m for m in lossless.get("mismatches") or [] if isinstance(m, dict)]
    other = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in lossless.items()
                    if k not in _LOSSLESS_KEYS and k != "status")
    note = ""
    if mism:
        total = lossless.get("num_mismatches", len(mism))
        note = (f'<p class="sub">{len(mism)} of {esc(total)} mismatch(es) recorded. '
                "Highlighted: each output from its first difference on.</p>")
    body = "".join(_mismatch(i, m) for i, m in enumerate(mism))
    return (f'<div class="card"><p>{head}</p>'
            + (f'<dl class="prov">{other}</dl>' if other else "") + note + body + "</div>")
