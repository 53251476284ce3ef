"""Page assembly: one self-contained HTML file, plotly.js embedded once, every name escaped.

The page loads nothing: plotly.js is inlined, there are no fonts, images or
links to fetch, and a Content-Security-Policy forbids any network request, so
an accidental one fails loudly (a console error) instead of leaking. Text
that comes from the trace is escaped here; bodies built by the figure and
table modules are trusted HTML whose own user strings they escaped.
"""

from __future__ import annotations

import html
import json
import pkgutil
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from traceattr.core.encoding import file_bytes

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)

CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg2: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1500px; padding: 16px 24px 48px; color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 22px; margin: 4px 0 8px; }
h2 { font-size: 18px; margin: 28px 0 6px; padding-top: 8px; border-top: 1px solid var(--line); }
nav { font-size: 13px; color: var(--muted); margin-bottom: 8px; }
nav a { color: inherit; margin-right: 14px; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; font-size: 13px; margin: 8px 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; overflow-wrap: anywhere; }
.intro { color: var(--muted); margin: 2px 0 8px; max-width: 110ch; }
.note { background: #fff8c5; border: 1px solid #d4a72c66; border-radius: 6px; padding: 6px 10px; margin: 6px 0;
        font-size: 13px; }
.table-wrap { overflow-x: auto; max-width: 100%; }
table.numbers td:last-child, table.numbers td.text { white-space: normal; min-width: 20ch; max-width: 60ch; }
table.numbers th.text { white-space: normal; }
table { border-collapse: collapse; font-size: 12px; }
th, td { padding: 3px 7px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--bg2); position: sticky; top: 0; }
td:nth-child(-n+2), th:nth-child(-n+2) { text-align: left; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[data-dir="asc"]::after { content: " ▲"; }
table.sortable th[data-dir="desc"]::after { content: " ▼"; }
tr.win td { background: #eaf5ea; }
.best { font-size: 11px; color: #1a7f37; border: 1px solid #1a7f3766; border-radius: 8px; padding: 0 5px; }
.tie { font-size: 11px; color: #6e5a00; border: 1px solid #9a7d0066; border-radius: 8px; padding: 0 5px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
table.kv td { text-align: left; white-space: normal; overflow-wrap: anywhere; }
table.kv td:first-child { color: var(--muted); white-space: nowrap; }
.picker select { font: inherit; max-width: 60ch; }
.hint { color: var(--muted); font-size: 12px; }
.plot { width: 100%; }
.subtitle { color: var(--muted); margin: 0 0 6px; font-size: 13px; }
ul.rules { margin: 4px 0 10px; padding-left: 20px; font-size: 15px; }
ul.rules li { margin: 3px 0; }
table.winners { font-size: 13px; margin: 4px 0; }
table.winners td, table.winners th { text-align: left; }
details > summary { cursor: pointer; color: var(--muted); margin: 6px 0; }
"""

# Sorting the numbers table and switching timeline views: the only script of ours.
JS = """
(function () {
  function cellKey(row, i) {
    var c = row.children[i], v = c.getAttribute("data-v");
    if (v === null) return null;
    var n = Number(v);
    return v !== "" && isFinite(n) ? n : v;
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0];
    var i = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = th.getAttribute("data-dir") !== "asc";
    th.parentNode.querySelectorAll("th").forEach(function (h) { h.removeAttribute("data-dir"); });
    th.setAttribute("data-dir", asc ? "asc" : "desc");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, i), y = cellKey(b, i);
      if (x === null || y === null) return (x === null) - (y === null);
      var d = typeof x === "number" && typeof y === "number" ? x - y
        : String(x).localeCompare(String(y), undefined, {numeric: true});
      return asc ? d : -d;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable th").forEach(function (th) {
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(th); });
  });
  document.querySelectorAll("select[data-views]").forEach(function (sel) {
    sel.addEventListener("change", function () {
      var gd = document.getElementById(sel.getAttribute("data-views"));
      var v = Number(sel.value), view = gd.layout.meta.views[v];
      gd.style.height = view.height + "px";  // the div too, or a taller view would spill over the next section
      Plotly.update(gd, {visible: gd.data.map(function (t) { return t.meta === v; })}, {
        "yaxis.categoryarray": view.lanes, "yaxis.range": [view.lanes.length - 0.5, -0.5],
        "xaxis.range": view.x, "height": view.height, "title.text": view.title
      });
    });
  });
})();
"""


@dataclass(frozen=True)
class Section:
    """One part of the page: *intro* and *notes* are plain text (escaped here), *body* is trusted HTML."""

    id: str
    title: str
    intro: str
    body: str
    notes: tuple[str, ...] = field(default=())


def facts_html(facts: Sequence[tuple[str, str]]) -> str:
    """A definition list of plain-text facts (escaped)."""
    items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in facts)
    return f'<dl class="facts">{items}</dl>'


def run_html(run: Mapping[str, Any]) -> str:
    """A profile run's run.json as a key/value table, nested keys dotted, every value escaped."""
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in _flatten(run))
    return f'<details open><summary>Run ({len(run)} entries)</summary><table class="kv">{rows}</table></details>'


def _flatten(value: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, v in value.items():
        name = f"{prefix}{key}"
        if isinstance(v, Mapping) and v:
            out.extend(_flatten(v, f"{name}."))
        elif isinstance(v, str):
            out.append((name, v))
        elif isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
            out.append((name, " ".join(v)))
        else:
            out.append((name, json.dumps(v, default=str)))
    return out


def notes_html(notes: Sequence[str]) -> str:
    return "".join(f'<div class="note">{html.escape(n)}</div>' for n in notes)


def plotly_js() -> bytes:
    """plotly.js as plotly ships it (the file ``plotly.offline.get_plotlyjs`` reads), UTF-8 bytes. Not that
    function's text: 24 characters beyond Latin-1 make Python store its 4.8 M characters 2 bytes each, and the
    page built around it as well (a report's peak, nested benchmark trace: +30 MB of text for a 5 MB file)."""
    bundle = pkgutil.get_data("plotly", "package_data/plotly.min.js")
    if bundle is None:  # a loader that cannot read package files (a zip import without data)
        raise FileNotFoundError("plotly's package_data/plotly.min.js cannot be read")
    return bundle


_SCRIPT_END = re.compile(rb"</script", re.IGNORECASE)


def page(title: str, header: str, sections: Sequence[Section], plotly_js: bytes) -> bytes:
    """The whole document, UTF-8. *header* is trusted HTML; plotly.js (:func:`plotly_js`; empty: a page without
    figures) goes in once, before every figure, as the bytes it is: the document is never one text."""
    if _SCRIPT_END.search(plotly_js):  # would end the inline script early
        raise ValueError("plotly.js bundle contains '</script': cannot be inlined")
    nav = "".join(f'<a href="#{s.id}">{html.escape(s.title)}</a>' for s in sections)
    body = "".join(
        f'<section id="{s.id}"><h2>{html.escape(s.title)}</h2><p class="intro">{html.escape(s.intro)}</p>'
        f"{notes_html(s.notes)}{s.body}</section>"
        for s in sections
    )
    head = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style>"
        '<script type="text/javascript">'
    )
    rest = (
        "</script></head>\n"
        f"<body><header><h1>{html.escape(title)}</h1><nav>{nav}</nav>{header}</header>\n"
        f"{body}\n<script>{JS}</script></body></html>\n"
    )
    return b"".join((file_bytes(head), plotly_js, file_bytes(rest)))
