"""`cclab report`: which folder is which, what the page holds, and that it loads nothing from
the network. The page as a browser draws it is tested in test_report_browser.py."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cclab.errors import CclabError
from cclab.report import REPORT_FILE, folder_kind, render_report, write_report
from cclab.report.plots import MAX_POINTS, bucketed
from cclab.results import RunResult
from conftest import constructed_engine_output, run_cli
from report_folders import cao_folder, kernel_like_run, sim_run, sweep_folder, validate_folder

# Attributes through which a page loads something (an <a href> is only followed on a click).
_LOADING_ATTRIBUTES = {"src", "srcset", "poster", "data", "background", "action", "formaction"}


class _Loads(HTMLParser):
    """Every URL the page would fetch by itself: src-like attributes, stylesheet and icon
    links, CSS url() and @import, and chart specs (a Plotly layout image is a URL)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in _LOADING_ATTRIBUTES or (tag == "link" and name == "href"):
                self.urls += [part.strip().split(" ")[0] for part in value.split(",")] if name == "srcset" else [value]
            if name == "style":
                self.urls += re.findall(r"url\(\s*['\"]?([^'\")]+)", value)
            if tag == "meta" and name == "content" and "url=" in value.lower():
                self.urls.append(value.lower().split("url=", 1)[1])
        self._in = "plot-spec" if tag == "script" and ("class", "plot-spec") in attrs else tag

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.urls += re.findall(r"url\(\s*['\"]?([^'\")]+)", data) + re.findall(r"@import\s+['\"]([^'\"]+)", data)
        elif self._in == "plot-spec":
            self.urls += re.findall(r"(?:https?:)?//[^\"\s]+", data)

    def handle_endtag(self, tag: str) -> None:
        self._in = None


def network_loads(page: str) -> list[str]:
    parser = _Loads()
    parser.feed(page)
    return [url for url in parser.urls if re.match(r"^\s*(https?:)?//", url, re.IGNORECASE)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("report")
    return {
        "run": sim_run(tmp),
        "kernel run": kernel_like_run(tmp),
        "sweep": sweep_folder(tmp),
        "study": cao_folder(tmp),
        "validate": validate_folder(tmp),
    }


@pytest.mark.sim
def test_each_folder_is_recognised_by_what_it_holds(folders: dict[str, Path], tmp_path: Path) -> None:
    assert {name: folder_kind(path) for name, path in folders.items()} == {
        "run": "run", "kernel run": "run", "sweep": "sweep", "study": "study", "validate": "validate",
    }  # fmt: skip
    with pytest.raises(CclabError, match="not a run, sweep, study or validate folder"):
        folder_kind(tmp_path)


@pytest.mark.sim
@pytest.mark.parametrize("kind", ["run", "kernel run", "sweep", "study", "validate"])
def test_a_report_loads_nothing_from_the_network(folders: dict[str, Path], kind: str) -> None:
    page = write_report(folders[kind]).read_text(encoding="utf-8")
    assert network_loads(page) == []
    # Sanity of the check itself: it does see a remote script or image.
    assert network_loads('<script src="https://cdn.plot.ly/plotly.js"></script><img src="//x.org/a.png">') == [
        "https://cdn.plot.ly/plotly.js", "//x.org/a.png",
    ]  # fmt: skip


@pytest.mark.sim
def test_cclab_run_writes_the_report_inside_the_result_folder_and_leaves_no_staging(folders: dict[str, Path]) -> None:
    run = folders["run"]
    assert (run / REPORT_FILE).is_file()
    assert [path.name for path in run.parent.iterdir() if path.name.startswith(".")] == []
    page = (run / REPORT_FILE).read_text(encoding="utf-8")
    assert "flow 0 (bbr)" in page and "flow 1 (cubic)" in page


def test_a_failing_report_leaves_no_result_folder(tmp_path: Path) -> None:
    result = RunResult.from_engine_output(constructed_engine_output(), spec={"seed": 1}, engine="sim")

    def broken(staging: Path) -> None:
        (staging / REPORT_FILE).write_text("half", encoding="utf-8")
        raise RuntimeError("report failed")

    with pytest.raises(RuntimeError):
        result.write(tmp_path / "out" / "run", also=broken)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sim
def test_a_kernel_run_that_failed_its_checks_says_so_and_shows_its_ce_marks(folders: dict[str, Path]) -> None:
    page = render_report(folders["kernel run"])
    assert "INVALID RUN" in page and "iperf3 reported a stall" in page
    assert "CE marks per sample" in page


@pytest.mark.sim
def test_a_study_summary_becomes_html_with_its_figures_embedded(folders: dict[str, Path]) -> None:
    page = render_report(folders["study"])
    assert "<table>" in page and '<strong class="badge ok">holds</strong>' in page
    assert "figures/gain_100KB.png" not in page  # replaced by the image itself
    assert len(re.findall(r'<img[^>]+src="data:image/(?:png|svg\+xml);base64,', page)) == 2
    assert "BBR&#x27;s goodput gain over CUBIC, buffer 100 KB" in page or "goodput gain over CUBIC, buffer 100 KB" in page


@pytest.mark.sim
def test_a_link_to_a_validate_figure_leads_to_the_figure_on_the_page(folders: dict[str, Path]) -> None:
    page = render_report(folders["validate"])
    assert 'href="#fig-figures-one_cubic"' in page
    assert 'id="fig-figures-one_cubic"' in page  # the figure the summary only links to, embedded below
    assert "comparison.csv" in page


def test_bucketing_a_long_series_keeps_its_mean_and_its_total(tmp_path: Path) -> None:
    n = 10 * MAX_POINTS
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"time_s": np.arange(n) / 1000, "queue_bytes": rng.uniform(0, 1e5, n), "drops": rng.integers(0, 3, n)})
    merged, width = bucketed(frame, "time_s", {"queue_bytes": "mean", "drops": "sum"})
    assert len(merged) <= MAX_POINTS and width == pytest.approx((n - 1) / 1000 / MAX_POINTS)
    assert merged["drops"].sum() == frame["drops"].sum()  # every drop still counted once
    assert merged["queue_bytes"].mean() == pytest.approx(frame["queue_bytes"].mean(), rel=1e-3)  # equal buckets
    short = frame.head(10)
    assert bucketed(short, "time_s", {"drops": "sum"}) == (short, None)


@pytest.mark.sim
def test_cclab_report_names_the_page_it_wrote_and_refuses_other_folders(folders: dict[str, Path], tmp_path: Path) -> None:
    done = run_cli("report", folders["sweep"])
    assert done.returncode == 0 and done.stderr.strip() == f"wrote {folders['sweep'] / REPORT_FILE}"
    done = run_cli("report", tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1


@pytest.mark.sim
def test_chart_data_matches_the_run(folders: dict[str, Path]) -> None:
    """The throughput chart holds exactly the run's samples, one trace per flow."""
    page = render_report(folders["run"])
    specs = [json.loads(text) for text in re.findall(r'<script type="application/json" class="plot-spec"[^>]*>(.*?)</script>', page)]
    throughput = next(spec for spec in specs if spec["layout"]["title"]["text"] == "Throughput per flow")
    series = RunResult.read(folders["run"]).flow_series
    assert [trace["name"] for trace in throughput["data"]] == ["flow 0 (bbr)", "flow 1 (cubic)"]
    for flow_id, trace in enumerate(throughput["data"]):
        rows = series[series["flow_id"] == flow_id]
        assert trace["x"] == rows["time_s"].tolist() and trace["y"] == pytest.approx(rows["throughput_mbps"].tolist())


@pytest.mark.sim
def test_the_run_report_counts_each_kind_of_event_per_flow(folders: dict[str, Path]) -> None:
    page = render_report(folders["run"])
    events = RunResult.read(folders["run"]).events
    section = page.split("<h2>Events</h2>", 1)[1].split("</section>", 1)[0]
    flow0_modes = int(((events["flow_id"] == 0) & (events["kind"] == "cc_mode")).sum())
    header = re.findall(r"<th>([^<]+)</th>", section)
    first_row = re.findall(r'data-value="([^"]*)"', section)[: len(header)]
    assert first_row[0] == "0" and int(first_row[header.index("cc_mode")]) == flow0_modes > 0


def test_the_run_report_shows_whole_run_copies_only_beside_a_warmup_and_no_metric_that_does_not_apply(tmp_path: Path) -> None:
    import cclab

    spec = {"duration_s": 2, "bottleneck": {"rate_mbps": 10, "rtt_ms": 20}, "flows": [{"cc": "cubic"}]}
    for warmup_s, whole_run_shown in ((0.0, False), (1.0, True)):
        result = cclab.run({**spec, "output": {"warmup_s": warmup_s}})
        out = result.write(tmp_path / f"w{warmup_s:g}")
        page = render_report(out)
        assert ("whole_run_goodput_mbps" in page) == whole_run_shown
        # A tail-drop queue has no L4S queue: its per-queue metrics are null and not listed.
        assert result.bottleneck["l4s_sojourn_p99_ms"] is None and "l4s_sojourn_p99_ms" not in page
        assert "sojourn_p99_ms" in page


def test_a_validate_folder_where_no_case_was_compared_still_gets_its_page(tmp_path: Path) -> None:
    # Every kernel run of the set invalid (a busy host): comparison.csv has no columns.
    from cclab.report.documents import render_document

    (tmp_path / "summary.md").write_text("# validate: quick\n\nEvery case was left out: its kernel runs were invalid.\n")
    pd.DataFrame([]).to_csv(tmp_path / "comparison.csv", index=False)
    page = render_document(tmp_path, "validate")
    assert "No case was compared." in page and "Every case was left out" in page
