"""One self-contained HTML page: sections, tables, images as data URIs and Plotly charts.

Nothing on the page is loaded from the network: Plotly's JavaScript (the copy the `plotly`
package bundles) is inlined, images are data URIs, and each chart's data sits in a JSON
script element beside its div, drawn by a few lines of script at the end of the page.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import math
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

# Plotly config for every chart: no "Produced with Plotly" link, no Chart Studio export.
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "showLink": False, "showSendToCloud": False}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { background: #1d2f4f; color: #fff; padding: 16px 28px; }
header h1 { margin: 0; font-size: 22px; } header p { margin: 4px 0 0; opacity: .85; }
nav { padding: 8px 28px; background: #e8ebf0; font-size: 14px; } nav a { margin-right: 14px; color: #1d2f4f; }
main { padding: 8px 28px 40px; max-width: 1400px; }
section { background: #fff; border-radius: 6px; padding: 6px 18px 14px; margin: 16px 0; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
h2 { font-size: 18px; border-bottom: 1px solid #e3e6eb; padding-bottom: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #dde1e7; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f0f2f5; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th { cursor: pointer; user-select: none; } table.sortable th:hover { background: #e2e6ec; }
.scroll { overflow: auto; max-height: 560px; }
.plot { width: 100%; height: 340px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 10px; }
figure { margin: 10px 0; } figure img { max-width: min(100%, 960px); height: auto; border: 1px solid #e3e6eb; }
figcaption { font-size: 13px; color: #555; }
pre { background: #f3f4f6; padding: 8px; overflow: auto; font-size: 12px; max-height: 420px; }
.badge { display: inline-block; padding: 2px 8px; border-radius: 10px; font-weight: 600; font-size: 13px; }
.ok { background: #d8f0dc; color: #1e6b2e; } .bad { background: #f8d7d7; color: #8a1c1c; }
.muted { color: #666; font-size: 13px; }
"""

# Draw every chart from its JSON; sort a table by a clicked header (numbers as numbers).
_SCRIPT = """
document.querySelectorAll('script.plot-spec').forEach(function (spec) {
  var figure = JSON.parse(spec.textContent);
  Plotly.newPlot(spec.dataset.target, figure.data, figure.layout, figure.config);
});
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, column) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var ascending = th.dataset.order !== 'asc';
      table.querySelectorAll('th').forEach(function (other) { delete other.dataset.order; });
      th.dataset.order = ascending ? 'asc' : 'desc';
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.value, y = b.cells[column].dataset.value;
        var nx = parseFloat(x), ny = parseFloat(y);
        var order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


@functools.cache
def plotly_js() -> str:
    """The plotly.js bundle shipped inside the `plotly` Python package."""
    return (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def plain(value: Any) -> Any:
    """A JSON-ready value: NaN, NA and infinities become null, numpy scalars Python ones."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _script_json(data: Any) -> str:
    # "</" would end the script element early; "<\/" means the same to JSON.parse.
    return json.dumps(data, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")


class Page:
    """A report page built section by section; `html()` returns the whole document."""

    def __init__(self, title: str, subtitle: str = "") -> None:
        self.title = title
        self.subtitle = subtitle
        self._sections: list[tuple[str, str, str]] = []  # (anchor, heading, body)
        self._plots = 0

    def section(self, heading: str, *parts: str) -> None:
        anchor = f"s{len(self._sections) + 1}"
        self._sections.append((anchor, heading, "\n".join(parts)))

    def plot(self, figure: dict[str, Any]) -> str:
        """A chart: a div and its figure ({"data": [...], "layout": {...}}) as JSON."""
        self._plots += 1
        target = f"plot-{self._plots}"
        spec = {"data": figure["data"], "layout": figure.get("layout", {}), "config": PLOT_CONFIG}
        height = spec["layout"].get("height")
        style = f' style="height:{int(height)}px"' if height else ""
        return (
            f'<div class="plot" id="{target}"{style}></div>'
            f'<script type="application/json" class="plot-spec" data-target="{target}">{_script_json(spec)}</script>'
        )

    @property
    def plot_count(self) -> int:
        return self._plots

    def html(self) -> str:
        nav = "".join(f'<a href="#{anchor}">{esc(heading)}</a>' for anchor, heading, _ in self._sections)
        sections = "\n".join(
            f'<section id="{anchor}"><h2>{esc(heading)}</h2>\n{body}\n</section>' for anchor, heading, body in self._sections
        )
        # Plotly goes first so the charts' script can call it; it is only needed with charts.
        library = f"<script>{plotly_js()}</script>" if self._plots else ""
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(self.title)}</title>"
            f"<style>{_STYLE}</style>{library}</head>\n<body>"
            f"<header><h1>{esc(self.title)}</h1><p>{esc(self.subtitle)}</p></header>"
            f"<nav>{nav}</nav>\n<main>\n{sections}\n</main>\n<script>{_SCRIPT}</script></body></html>\n"
        )


# ---- pieces -------------------------------------------------------------------------------


def cell_text(value: Any) -> str:
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def frame_table(frame: pd.DataFrame, *, sortable: bool = False, max_rows: int = 5000) -> str:
    """An HTML table of a DataFrame: numbers right-aligned, sortable by clicking a header."""
    head = "".join(f"<th>{esc(name)}</th>" for name in frame.columns)
    rows = []
    for record in frame.head(max_rows).itertuples(index=False):
        cells = []
        for value in record:
            value = plain(value)
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            sort_key = "" if value is None else value
            css = ' class="num"' if numeric else ""
            cells.append(f'<td{css} data-value="{esc(sort_key)}">{esc(cell_text(value))}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="muted">first {max_rows} of {len(frame)} rows</p>' if len(frame) > max_rows else ""
    css = ' class="sortable"' if sortable else ""
    return f'<div class="scroll"><table{css}><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>{note}'


def key_value_table(items: Iterable[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{esc(key)}</th><td>{esc(cell_text(value))}</td></tr>" for key, value in items)
    return f"<table>{rows}</table>"


def json_block(data: Any) -> str:
    return f"<pre>{esc(json.dumps(data, indent=2, default=str))}</pre>"


def grid(parts: Sequence[str]) -> str:
    return '<div class="grid">' + "".join(f"<div>{part}</div>" for part in parts) + "</div>"


def image_data_uri(path: Path) -> str:
    kind = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}[path.suffix.lower()]
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def figure_html(path: Path, *, anchor: str | None = None, caption: str | None = None) -> str:
    """An image file embedded as a data URI, inside a <figure> with an optional anchor."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    label = esc(caption if caption is not None else path.stem)
    return f'<figure{ident}><img alt="{label}" src="{image_data_uri(path)}"><figcaption>{label}</figcaption></figure>'
