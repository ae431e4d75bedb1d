"""The report of a study or validate folder: summary.md as HTML with every figure embedded.

Images the summary shows are embedded where it shows them; every other figure of the
folder (top level and figures/) follows in a Figures section, and links to a figure file
become links to its place on the page. A cao2019-style `goodput.csv` (BBR vs CUBIC over
rate x RTT x buffer) also gets interactive heatmaps of the goodput gain.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import markdown
import numpy as np
import pandas as pd

from cclab.report import plots
from cclab.report.page import Page, figure_html, frame_table, grid, image_data_uri

IMAGE_SUFFIXES = (".png", ".svg")
_IMG = re.compile(r'<img([^>]*?)src="([^"]+)"([^>]*)>')
_LINK = re.compile(r'href="([^"#:]+\.(?:png|svg))"')


def summary_title(text: str, fallback: str) -> tuple[str, str]:
    """The summary's first level-1 heading as the page title, and the text without it."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("# "):
            return line[2:].strip(), "\n".join(lines[:index] + lines[index + 1 :])
    return fallback, text


def figure_files(folder: Path) -> dict[str, Path]:
    """Each figure of the folder by its path relative to it without suffix ("figures/gain_10MB"):
    of a PNG and an SVG of the same figure, the smaller file (SVG scales, PNG is compact for
    dense plots)."""
    chosen: dict[str, Path] = {}
    for directory in (folder, folder / "figures"):
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
                continue
            key = path.relative_to(folder).with_suffix("").as_posix()
            if key not in chosen or path.stat().st_size < chosen[key].stat().st_size:
                chosen[key] = path
    return chosen


def anchor(key: str) -> str:
    return "fig-" + re.sub(r"[^A-Za-z0-9_-]", "-", key)


def render_document(folder: Path, kind: str) -> str:
    """The page for a study ("study") or a validate ("validate") folder."""
    text = (folder / "summary.md").read_text(encoding="utf-8")
    title, body = summary_title(text, f"{kind}: {folder.name}")
    page = Page(title, f"{kind} folder {folder.resolve().name}")
    figures = figure_files(folder)
    summary_html, shown = embed_figures(markdown.markdown(body, extensions=["tables", "fenced_code", "sane_lists"]), figures)
    page.section("Summary", colour_verdicts(summary_html))
    heatmaps = gain_heatmaps(folder / "goodput.csv")
    if heatmaps:
        page.section("Goodput gain (interactive)", grid([page.plot(figure) for figure in heatmaps]))
    rest = [key for key in figures if key not in shown]
    if rest:
        page.section("Figures", "\n".join(figure_html(figures[key], anchor=anchor(key), caption=key) for key in rest))
    comparison = folder / "comparison.csv"
    if kind == "validate" and comparison.is_file():
        try:
            table_html = frame_table(pd.read_csv(comparison), sortable=True)
        except pd.errors.EmptyDataError:
            # No case was compared (every kernel run of the set invalid): the summary says why.
            table_html = "<p>No case was compared.</p>"
        page.section("Comparison (comparison.csv)", table_html)
    return page.html()


# Verdicts the summaries write in bold (verdict() in studies/_common.py, "confirmed" in the
# many-flows studies, "**no**" in validate's tables), coloured as they read.
_GOOD = {"holds", "confirmed", "yes", "met"}
_BAD = {"does not hold", "not confirmed", "refuted", "no", "not met"}


def colour_verdicts(body: str) -> str:
    def verdict(match: re.Match[str]) -> str:
        text = match.group(1).strip().lower()
        css = "ok" if text in _GOOD else "bad" if text in _BAD else None
        return f'<strong class="badge {css}">{match.group(1)}</strong>' if css else match.group(0)

    return re.sub(r"<strong>([^<]{1,40})</strong>", verdict, body)


def embed_figures(body: str, figures: dict[str, Path]) -> tuple[str, set[str]]:
    """Images pointing at the folder's figures become data URIs; links to them, anchors."""
    shown: set[str] = set()

    def image(match: re.Match[str]) -> str:
        key = _key(match.group(2))
        if key not in figures:
            return match.group(0)
        first = key not in shown
        shown.add(key)
        ident = f' id="{anchor(key)}"' if first else ""
        return f'<img{match.group(1)}src="{image_data_uri(figures[key])}"{ident}{match.group(3)}>'

    body = _IMG.sub(image, body)

    def link(match: re.Match[str]) -> str:
        key = _key(match.group(1))
        return f'href="#{anchor(key)}"' if key in figures else match.group(0)

    return _LINK.sub(link, body), shown


def _key(src: str) -> str:
    return Path(src.removeprefix("./")).with_suffix("").as_posix()


# ---- cao2019 ------------------------------------------------------------------------------

_GAIN_COLUMNS = {"rate_mbps", "rtt_ms", "buffer_bytes", "gain_pct", "goodput_mbps_bbr", "goodput_mbps_cubic"}


def gain_heatmaps(path: Path) -> list[dict[str, Any]]:
    """BBR's goodput gain over CUBIC per rate x RTT, one heatmap per buffer size."""
    if not path.is_file():
        return []
    table = pd.read_csv(path)
    if not _GAIN_COLUMNS <= set(table.columns):
        return []
    charts = []
    for buffer_bytes, rows in table.groupby("buffer_bytes", sort=True):
        gain = rows.pivot_table(index="rate_mbps", columns="rtt_ms", values="gain_pct", aggfunc="mean").sort_index().sort_index(axis=1)
        bbr = rows.pivot_table(index="rate_mbps", columns="rtt_ms", values="goodput_mbps_bbr", aggfunc="mean").reindex_like(gain)
        cubic = rows.pivot_table(index="rate_mbps", columns="rtt_ms", values="goodput_mbps_cubic", aggfunc="mean").reindex_like(gain)
        # A network whose runs had not converged (goodput.csv's `transient`) says so on hover.
        transient = np.zeros(gain.shape, dtype=bool)
        if "transient" in rows.columns:
            marks = rows.assign(t=rows["transient"].astype(float)).pivot_table(index="rate_mbps", columns="rtt_ms", values="t", aggfunc="max")
            transient = marks.reindex_like(gain).fillna(0).to_numpy(float) > 0
        hover = [
            [
                (f"BBR {b:.1f} Mbit/s, CUBIC {c:.1f} Mbit/s" + (" (not converged: transient)" if t else "")) if np.isfinite(b) and np.isfinite(c) else ""
                for b, c, t in zip(bbr_row, cubic_row, t_row, strict=True)
            ]
            for bbr_row, cubic_row, t_row in zip(bbr.to_numpy(float), cubic.to_numpy(float), transient, strict=True)
        ]
        note = f" ({int(transient.sum())} cells not converged: see hover)" if transient.any() else ""
        charts.append(
            plots.heatmap(
                f"BBR's goodput gain over CUBIC, buffer {_size(int(buffer_bytes))}{note}",
                [f"{v:g}" for v in gain.columns],
                [f"{v:g}" for v in gain.index],
                gain.to_numpy(float),
                x_title="RTT (ms)",
                y_title="rate (Mbit/s)",
                z_title="gain %",
                hover=hover,
            )
        )
    return charts


def _size(size_bytes: int) -> str:
    return f"{size_bytes / 1e6:g} MB" if size_bytes >= 1_000_000 else f"{size_bytes / 1e3:g} KB"

