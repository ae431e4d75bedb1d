"""report.html in a real browser: Debian's chromium, headless, driven by playwright.

Each page must load with no console error and no request beyond the file itself, draw every
chart with the traces its data calls for (one per flow, one per buffer size, ...), and show
a point's value when the mouse rests on it. The browser is told to stay off the network,
and every request other than file: and data: is blocked and counted as a failure.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cclab.report import REPORT_FILE, write_report
from cclab.report.documents import figure_files
from cclab.report.run import FLOW_METRICS, QUEUE_METRICS
from cclab.results import RunResult
from report_folders import cao_folder, kernel_like_run, sim_run, study_folder, sweep_folder, validate_folder

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
# Nothing in the background: no component or safe-browsing updates, no DNS (every host name
# fails to resolve), no first-run or sync traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-pings",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the test extra installs playwright")
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.skip("no /usr/bin/chromium (make test installs Debian's chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("report-browser")
    made = {"run": sim_run(tmp), "kernel run": kernel_like_run(tmp), "sweep": sweep_folder(tmp), "study": study_folder(tmp), "cao2019": cao_folder(tmp), "validate": validate_folder(tmp)}
    for kind in ("kernel run", "sweep", "cao2019", "validate"):  # `cclab run` and `reproduce` wrote theirs
        write_report(made[kind])
    return made


class Opened:
    """A report open in the browser, with what went wrong while it loaded."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.problems: list[str] = []
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.context.route("**/*", self._only_local)
        self.page = self.context.new_page()
        self.page.on("console", lambda message: message.type == "error" and self.problems.append(f"console: {message.text}"))
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", lambda request: self.problems.append(f"request failed: {request.url[:100]}"))
        self.page.goto(path.resolve().as_uri(), wait_until="load")
        self.page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length === document.querySelectorAll('script.plot-spec').length")

    def _only_local(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            self.problems.append(f"network request: {url[:100]}")
            route.abort()

    def plots(self) -> dict[str, dict[str, Any]]:
        """Per chart title: its traces, how many are drawn in the SVG, and their point counts."""
        summaries = self.page.evaluate(
            """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => ({
                title: el.layout.title.text,
                traces: el.data.length,
                drawn: el.querySelectorAll('.scatterlayer .trace, .barlayer .trace, .heatmaplayer .hm').length,
                lines: Array.from(el.querySelectorAll('.scatterlayer .trace path.js-line')).filter(p => (p.getAttribute('d') || '').length > 10).length,
                points: el.data.map(t => (t.type === 'heatmap' ? t.z.length * t.z[0].length : t.x.length)),
            }))"""
        )
        return {summary.pop("title"): summary for summary in summaries}

    def hover(self, title: str, trace: int, point: int | tuple[int, int]) -> list[str]:
        """Rest the mouse on a point (a heatmap cell as (column, row)); the hover labels' lines."""
        x, y = self.page.evaluate(
            """([title, t, p]) => {
                const el = Array.from(document.querySelectorAll('.js-plotly-plot')).find(e => e.layout.title.text === title);
                el.scrollIntoView({block: 'center'});
                const layout = el._fullLayout, data = el._fullData[t], box = el.getBoundingClientRect();
                const [xv, yv] = Array.isArray(p) ? [data.x[p[0]], data.y[p[1]]] : [data.x[p], data.y[p]];
                return [box.left + layout.xaxis._offset + layout.xaxis.l2p(layout.xaxis.d2l(xv)),
                        box.top + layout.yaxis._offset + layout.yaxis.l2p(layout.yaxis.d2l(yv))];
            }""",
            [title, trace, list(point) if isinstance(point, tuple) else point],
        )
        self.page.mouse.move(x, y)
        self.page.wait_for_selector(".hoverlayer .hovertext", state="attached")
        return self.page.evaluate(
            """() => Array.from(document.querySelectorAll('.hoverlayer .hovertext')).map(h =>
                Array.from(h.querySelectorAll('text.nums tspan.line')).map(t => t.textContent).join(' | ') || h.textContent)"""
        )

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def open_report(browser: Any) -> Iterator[Any]:
    opened: list[Opened] = []

    def open_(path: Path) -> Opened:
        opened.append(Opened(browser, path / REPORT_FILE))
        return opened[-1]

    yield open_
    for page in opened:
        page.close()


def _number_before(unit: str, texts: list[str], label: str) -> float:
    text = next(text for text in texts if label in text)
    return float(re.search(rf"(-?[\d.]+(?:e[-+]?\d+)?) {re.escape(unit)}", text).group(1))


@pytest.mark.sim
def test_a_run_report_draws_a_trace_per_flow_in_every_chart_and_hover_shows_the_value(folders: dict[str, Path], open_report: Any) -> None:
    run = open_report(folders["run"])
    result = RunResult.read(folders["run"])
    plots = run.plots()
    assert run.problems == []
    series, queue, events = result.flow_series, result.queue_series, result.events
    flows_with = {column: sorted(series.dropna(subset=[column])["flow_id"].unique()) for column, *_ in FLOW_METRICS}
    states = events[events["kind"].isin(["cc_mode", "ca_state"])]["detail"].nunique()
    queue_charts = sum(queue[column].notna().any() for column, *_ in QUEUE_METRICS)
    # A chart per flow metric, the CC states, the queue's, and each flow's share of the link.
    assert len(plots) == sum(bool(ids) for ids in flows_with.values()) + 1 + queue_charts + 1
    share_title = next(title for title in plots if title.startswith("Share of the link per flow"))
    assert plots[share_title]["drawn"] == 2
    assert plots["Throughput per flow"]["traces"] == plots["Throughput per flow"]["drawn"] == plots["Throughput per flow"]["lines"] == 2
    assert plots["Throughput per flow"]["points"] == [int((series["flow_id"] == flow).sum()) for flow in (0, 1)]
    assert plots["BBR bandwidth estimate"]["drawn"] == len(flows_with["bbr_bw_mbps"]) == 1  # the CUBIC flow has none
    assert plots["CC mode and loss state per flow"]["drawn"] == states
    queue_title = next(title for title in plots if title.startswith("Bottleneck queue"))
    assert plots[queue_title]["drawn"] == plots[queue_title]["lines"] == 1
    for title, plot in plots.items():
        assert plot["drawn"] == plot["traces"] > 0, title

    flow0 = series[series["flow_id"] == 0].reset_index(drop=True)
    middle = len(flow0) // 2
    labels = run.hover("Throughput per flow", 0, middle)
    assert _number_before("Mbit/s", labels, "flow 0 (bbr)") == pytest.approx(flow0.loc[middle, "throughput_mbps"], rel=1e-3)
    assert any(f"t = {flow0.loc[middle, 'time_s']:.3f} s" in text for text in labels)


@pytest.mark.sim
def test_a_kernel_run_report_draws_its_sampled_modes_and_ce_marks(folders: dict[str, Path], open_report: Any) -> None:
    run = open_report(folders["kernel run"])
    plots = run.plots()
    assert run.problems == []
    assert plots["CE marks per sample"]["drawn"] == 1
    # No mode events: the sampled cc_mode of the BBR flow (STARTUP then DRAIN) makes the band.
    assert plots["CC mode and loss state per flow"]["drawn"] == 2
    assert "INVALID RUN" in run.page.inner_text("#s1")


@pytest.mark.sim
def test_a_sweep_report_draws_goodput_per_axis_and_per_run_and_sorts_its_tables(folders: dict[str, Path], open_report: Any) -> None:
    sweep = open_report(folders["sweep"])
    plots = sweep.plots()
    assert sweep.problems == []
    by_rate = plots["Goodput per flow by rate (Mbit/s)"]
    assert by_rate["drawn"] == 2 and sorted(by_rate["points"]) == [2, 2]  # a trace per CC, a point per run
    assert plots["Goodput per run (stacked by flow kind)"]["points"] == [4, 4]
    # A chart of throughput over time per run (4 runs), a drawn line per flow (one each).
    per_run = sweep.page.evaluate("() => Array.from(document.querySelectorAll('#s3 .js-plotly-plot')).map(el => el.querySelectorAll('.scatterlayer .trace path.js-line').length)")
    assert per_run == [1, 1, 1, 1]
    flows = pd.read_parquet(folders["sweep"] / "flows.parquet")
    cubic_at_10 = flows[(flows["cc"] == "cubic") & (flows["rate_mbps"] == 10)]["goodput_mbps"].item()
    cubic = next(index for index, name in enumerate(sweep.page.evaluate("() => document.querySelector('.js-plotly-plot').data.map(t => t.name)")) if name == "cubic")
    labels = sweep.hover("Goodput per flow by rate (Mbit/s)", cubic, 0)
    assert float(re.search(r"goodput \(Mbit/s\) = ([\d.]+)", " ".join(labels)).group(1)) == pytest.approx(cubic_at_10, rel=1e-3)
    # Clicking a header sorts the flows table by it.
    table = sweep.page.locator("#s4 table")
    column = table.locator("th").all_inner_texts().index("goodput_mbps")
    header, cells = table.locator("th").nth(column), table.locator(f"tbody tr td:nth-child({column + 1})")
    header.click()
    ascending = [float(text) for text in cells.all_inner_texts()]
    header.click()
    descending = [float(text) for text in cells.all_inner_texts()]
    assert len(ascending) == len(flows) and len(set(ascending)) > 1
    assert ascending == sorted(ascending) and descending == ascending[::-1]


@pytest.mark.sim
def test_a_study_report_shows_every_figure_of_the_study(folders: dict[str, Path], open_report: Any) -> None:
    study = open_report(folders["study"])
    assert study.problems == []
    decoded = study.page.evaluate("() => Array.from(document.images).map(img => img.complete && img.naturalWidth > 0)")
    assert decoded == [True] * len(figure_files(folders["study"]))
    assert study.page.locator("section#s1 table").count() >= 1  # the summary's tables


def test_cao2019_heatmaps_draw_one_grid_per_buffer_and_hover_shows_the_gain(folders: dict[str, Path], open_report: Any) -> None:
    cao = open_report(folders["cao2019"])
    plots = cao.plots()
    assert cao.problems == []
    table = pd.read_csv(folders["cao2019"] / "goodput.csv")
    heatmaps = {title: plot for title, plot in plots.items() if title.startswith("BBR's goodput gain over CUBIC")}
    assert len(heatmaps) == table["buffer_bytes"].nunique()
    cells = table["rate_mbps"].nunique() * table["rtt_ms"].nunique()
    assert all(plot["drawn"] == 1 and plot["points"] == [cells] for plot in heatmaps.values())
    # The cell at the highest RTT and rate with the 100 KB buffer.
    row = table[(table["buffer_bytes"] == 100_000) & (table["rtt_ms"] == 200) & (table["rate_mbps"] == 100)].iloc[0]
    labels = cao.hover("BBR's goodput gain over CUBIC, buffer 100 KB", 0, (2, 1))
    gain = float(re.search(r"gain % = (-?[\d.]+)", " ".join(labels)).group(1))
    assert gain == pytest.approx(row["gain_pct"], rel=1e-3)
    assert cao.page.evaluate("() => Array.from(document.images).every(img => img.naturalWidth > 0)")


def test_a_validate_report_loads_with_its_figures_and_comparison(folders: dict[str, Path], open_report: Any) -> None:
    validate = open_report(folders["validate"])
    assert validate.problems == []
    assert validate.page.evaluate("() => Array.from(document.images).filter(img => img.naturalWidth > 0).length") == 2
    validate.page.click("a[href='#fig-figures-one_cubic']")
    assert validate.page.evaluate("() => location.hash") == "#fig-figures-one_cubic"
