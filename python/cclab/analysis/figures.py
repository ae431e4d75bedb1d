"""Figures a person can read: heatmaps with their values printed in the cells, line
charts with units on the axes, saved as both PNG (to look at) and SVG (to print).

Figures are built on `matplotlib.figure.Figure` directly, never through pyplot, so no
GUI backend or global figure state is involved and worker processes stay clean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import colors
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

HeatmapKind = Literal["diverging", "sequential", "log"]

# Red means "BBR better", blue "CUBIC better", as in Cao et al. Fig. 5; white is zero.
DIVERGING_CMAP = "RdBu_r"
SEQUENTIAL_CMAP = "viridis"
LOG_CMAP = "magma_r"
PNG_DPI = 150
# Gains (percent) within +-this are drawn on a linear colour scale, beyond it on a log one.
DIVERGING_LINEAR_PCT = 10.0
# Printed after the value of a cell whose runs had not converged (cclab.analysis.steady).
TRANSIENT_MARK = "*"
TRANSIENT_LEGEND = f"{TRANSIENT_MARK} = not converged (transient)"


def new_figure(width_in: float, height_in: float) -> Figure:
    """A figure with its own Agg canvas (some drawers, like scikit-learn's plot_tree,
    need a renderer), laid out so labels never overlap."""
    figure = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def compact_number(value: float) -> str:
    """A number in at most about five characters: 0, 7, 42.5, 1.2k, 236k, 3.4M."""
    if value is None or not np.isfinite(value):
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:.1f}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:.0f}k"
    if magnitude >= 1e3:
        return f"{value / 1e3:.1f}k"
    if magnitude >= 100 or float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.1f}"


def axis_label(value: object) -> str:
    """A tick label for an axis value: numbers without a trailing `.0`, others as text."""
    return f"{value:g}" if isinstance(value, (int, float, np.number)) else str(value)


def pivot(table: pd.DataFrame, *, x: str, y: str, value: str) -> pd.DataFrame:
    """`value` with one row per `y` (ascending) and one column per `x` (ascending);
    duplicates (repetitions) are averaged."""
    grid = table.pivot_table(index=y, columns=x, values=value, aggfunc="mean", dropna=False)
    return grid.sort_index(axis=0).sort_index(axis=1)


def _norm(values: np.ndarray, kind: HeatmapKind, limits: tuple[float, float] | None) -> colors.Normalize:
    finite = values[np.isfinite(values)]
    if kind == "diverging":
        # Symmetric about zero (white), so equal colours mean equal magnitudes either way;
        # logarithmic beyond +-DIVERGING_LINEAR_PCT so that a -30% cell stays visible
        # beside a +2000% one, linear within it so that noise near zero stays pale.
        extreme = float(np.abs(finite).max()) if finite.size else 1.0
        if limits is not None:
            extreme = max(abs(limits[0]), abs(limits[1]))
        extreme = max(extreme, DIVERGING_LINEAR_PCT * 1.01)
        return colors.SymLogNorm(linthresh=DIVERGING_LINEAR_PCT, linscale=0.5, vmin=-extreme, vmax=extreme, base=10)
    if kind == "log":
        positive = finite[finite > 0]
        low, high = (float(positive.min()), float(positive.max())) if positive.size else (1.0, 10.0)
        if limits is not None:
            low, high = limits
        return colors.LogNorm(vmin=max(low, 1e-12), vmax=max(high, low * 10))
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if limits is not None:
        low, high = limits
    return colors.Normalize(vmin=low, vmax=high if high > low else low + 1)


def draw_heatmap(
    ax: Axes,
    grid: pd.DataFrame,
    *,
    kind: HeatmapKind = "sequential",
    xlabel: str,
    ylabel: str,
    colorbar_label: str,
    title: str,
    cell_format: Callable[[float], str] = compact_number,
    limits: tuple[float, float] | None = None,
    transient: pd.DataFrame | None = None,
) -> None:
    """Draw `grid` (rows = y from bottom to top, columns = x) with each cell's value in it.

    kind: "diverging" centres a symmetric colour scale on zero (gains, in percent); "log" colours positive
    counts on a log scale and leaves zeros white with a printed 0; "sequential" is linear.
    transient: a grid like `grid`, true where the cell's runs had not converged; those
    cells get TRANSIENT_MARK after their value and the title says what it means.
    """
    marked = np.zeros(grid.shape, dtype=bool)
    if transient is not None:
        aligned = transient.reindex(index=grid.index, columns=grid.columns)
        marked = aligned.fillna(0).to_numpy(dtype=float) > 0
        if marked.any():
            title = f"{title}\n({TRANSIENT_LEGEND})"
    values = grid.to_numpy(dtype=float)
    norm = _norm(values, kind, limits)
    cmap_name = {"diverging": DIVERGING_CMAP, "sequential": SEQUENTIAL_CMAP, "log": LOG_CMAP}[kind]
    cmap = matplotlib.colormaps[cmap_name].with_extremes(bad="white")
    shown = np.ma.masked_invalid(np.where(values <= 0, np.nan, values) if kind == "log" else values)
    image = ax.imshow(shown, origin="lower", aspect="auto", cmap=cmap, norm=norm)
    colorbar = ax.figure.colorbar(image, ax=ax)
    colorbar.set_label(colorbar_label)
    for row in range(values.shape[0]):
        for col in range(values.shape[1]):
            value = values[row, col]
            rgba = (1.0, 1.0, 1.0, 1.0) if np.ma.is_masked(shown[row, col]) else cmap(norm(value))
            # Dark text on light cells, light text on dark ones (relative luminance).
            luminance = 0.2126 * rgba[0] + 0.7152 * rgba[1] + 0.0722 * rgba[2]
            text = cell_format(value) + (TRANSIENT_MARK if marked[row, col] else "")
            ax.text(col, row, text, ha="center", va="center", fontsize=7,
                    color="black" if luminance > 0.5 else "white")
    ax.set_xticks(range(values.shape[1]), [axis_label(v) for v in grid.columns])
    ax.set_yticks(range(values.shape[0]), [axis_label(v) for v in grid.index])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)


def heatmap_figure(
    table: pd.DataFrame,
    *,
    x: str,
    y: str,
    value: str,
    transient: str | None = None,
    **options: object,
) -> Figure:
    """One heatmap of `value` over `x` and `y` from a long table (see `draw_heatmap`);
    `transient` names a boolean column: a cell is marked when any of its rows is true."""
    figure = new_figure(8.0, 6.0)
    marks = None
    if transient is not None and transient in table.columns:
        marks = pivot(table.assign(_transient=table[transient].fillna(False).astype(float)), x=x, y=y, value="_transient")
    draw_heatmap(figure.add_subplot(), pivot(table, x=x, y=y, value=value), transient=marks, **options)  # type: ignore[arg-type]
    return figure


def line_figure(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    xlog: bool = False,
    ylog: bool = False,
    styles: Mapping[str, Mapping[str, object]] | None = None,
    vlines: Mapping[str, float] | None = None,
) -> Figure:
    """Lines with markers, one per label; `styles` overrides a line's matplotlib options,
    `vlines` draws labelled dotted vertical lines (e.g. predicted cliff points)."""
    figure = new_figure(8.0, 5.0)
    ax = figure.add_subplot()
    for label, (xs, ys) in series.items():
        style: dict[str, object] = {"marker": "o", "markersize": 4}
        style.update((styles or {}).get(label, {}))
        ax.plot(list(xs), list(ys), label=label, **style)  # type: ignore[arg-type]
    for label, position in (vlines or {}).items():
        ax.axvline(position, linestyle=":", linewidth=1, color="grey")
        ax.annotate(label, (position, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                    ha="right", va="top", fontsize=7, color="dimgrey")
    if xlog:
        ax.set_xscale("log")
    if ylog:
        ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return figure


def save_figure(figure: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write `stem.png` and `stem.svg` into `out_dir`; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    figure.savefig(paths[0], dpi=PNG_DPI)
    # The layout is in fractions of the figure, the same at any DPI: keep the one the PNG
    # computed rather than run constrained layout again (a third of an SVG's time).
    figure.set_layout_engine("none")
    figure.savefig(paths[1])
    return paths
