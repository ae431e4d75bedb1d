"""`cclab validate`'s parts that need no kernel: the set, the comparison, the figures of merit.

Comparisons are checked on real simulator results, with a second result derived from the
first where a test needs two engines to differ by a known amount.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cclab.engines import get_engine
from cclab.errors import SpecError
from cclab.fidelity import compare
from cclab.fidelity.sets import Case, default_set, get_set, only_cases, quick_set
from cclab.results import RunResult
from cclab.spec.aqm import AQM_NAMES
from conftest import run_cli

# The kernel engine's envelope on this machine (docs/FIDELITY.md): at most this rate.
KERNEL_FAITHFUL_RATE_MBPS = 100
# Kernel engine overhead per run (namespaces, iperf3 start, teardown): 0.8 s measured
# (65 runs of 910 s in 962 s wall).
KERNEL_RUN_OVERHEAD_S = 1.0


def test_the_default_set_is_about_forty_valid_cases_within_the_kernel_envelope_and_twenty_minutes() -> None:
    cases = default_set().cases
    assert 30 <= len(cases) <= 45
    assert len({c.name for c in cases}) == len(cases)
    scenarios = [c.scenario() for c in cases]
    assert max(s.bottleneck.rate_mbps for s in scenarios) <= KERNEL_FAITHFUL_RATE_MBPS
    kernel_s = sum((s.duration_s + KERNEL_RUN_OVERHEAD_S) * c.repetitions for s, c in zip(scenarios, cases, strict=True))
    assert kernel_s < 20 * 60


def test_the_default_set_covers_the_regimes_the_issue_names() -> None:
    scenarios = {c.name: c.scenario() for c in default_set().cases}
    bdp_buffers = []
    for s in scenarios.values():
        bdp_bytes = s.bottleneck.rate_bps * s.bottleneck.rtt_ms / 1e3 / 8
        bdp_buffers.append((bdp_bytes, s.resolve()["bottleneck"]["queue_limit_bytes"] / bdp_bytes))
    assert min(b for _, b in bdp_buffers) <= 0.2 and max(b for _, b in bdp_buffers) >= 2  # shallow and deep
    assert min(d for d, _ in bdp_buffers) <= 30e3 and max(d for d, _ in bdp_buffers) >= 1e6  # low and high BDP
    losses = {s.bottleneck.loss for s in scenarios.values()}
    assert min(v for v in losses if v > 0) <= 0.0001 and max(losses) >= 0.2
    gains = {f.probe_bw_gain for s in scenarios.values() for f in s.flows}
    assert {1.1, 1.5} <= gains
    flow_mixes = {(len(s.resolve()["flows"]), frozenset(f.cc for f in s.flows)) for s in scenarios.values()}
    for count in (2, 4):
        assert (count, frozenset({"bbr"})) in flow_mixes and (count, frozenset({"cubic"})) in flow_mixes
        assert (count, frozenset({"bbr", "cubic"})) in flow_mixes
    assert any(len({f.extra_rtt_ms for f in s.flows}) > 1 for s in scenarios.values())
    pairs: dict[str, set[str]] = {}
    for c in default_set().cases:
        if c.pair:
            pairs.setdefault(c.pair, set()).add(c.scenario().flows[0].cc)
    assert pairs and all(members == {"bbr", "cubic"} for members in pairs.values())
    assert {"probe_rtt", "sawtooth"} <= {c.shows for c in default_set().cases}


def test_validate_with_a_case_not_in_the_set_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "validate"
    done = run_cli("validate", "--set", "quick", "--case", "nope", "--out", out)
    assert done.returncode == 2
    names = ", ".join(c.name for c in get_set("quick").cases)
    assert done.stderr.strip().splitlines() == [f"error: --case nope: not in the quick set; its cases: {names}"]
    assert not out.exists()


def test_only_cases_keeps_the_named_cases_in_the_sets_order() -> None:
    rtt = get_set("rtt")
    names = [rtt.cases[5].name, rtt.cases[1].name]
    cut = only_cases(rtt, names)
    assert [c.name for c in cut.cases] == [rtt.cases[1].name, rtt.cases[5].name]
    assert cut.name == "rtt" and cut.cases[0] == rtt.cases[1]


def test_an_unknown_set_is_one_line_naming_the_option() -> None:
    with pytest.raises(SpecError, match=r"^--set: unknown validation set 'nope'; one of default, bbr23, aqm, rtt, host, all, quick"):
        get_set("nope")


def test_a_broken_case_names_itself() -> None:
    case = Case("bad", "buffer", {"duration_s": 1, "bottleneck": {"rate_mbps": -1, "rtt_ms": 1}, "flows": [{"cc": "bbr"}]})
    with pytest.raises(SpecError, match=r"^validation case bad: bottleneck.rate_mbps"):
        case.scenario()


@pytest.mark.parametrize(
    ("bbr", "cubic", "expected"),
    [(50.0, 10.0, "bbr"), (10.0, 50.0, "cubic"), (50.0, 48.0, "tie"), (0.0, 0.0, "tie")],
)
def test_the_winner_needs_a_margin_of_five_percent(bbr: float, cubic: float, expected: str) -> None:
    assert compare.winner({"bbr": bbr, "cubic": cubic}) == expected


def test_there_is_no_winner_without_both_ccs() -> None:
    assert compare.winner({"bbr": 10.0}) is None


def _series(cwnd: list[float], flow_id: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"time_s": np.arange(len(cwnd)) * 0.05, "flow_id": flow_id, "cwnd_pkts": cwnd})


def test_probe_rtt_dips_are_counted_after_the_ramp_not_at_the_start() -> None:
    steady = [60.0] * 200
    cwnd = [10.0, 4.0, 30.0] + steady + [4.0] * 5 + steady + [4.0] * 5 + steady
    assert compare.pattern_count(_series(cwnd), "probe_rtt") == 2
    assert compare.pattern_count(_series([10.0, 4.0, 30.0] + steady), "probe_rtt") == 0


def test_sawtooth_teeth_are_drops_of_a_fifth_or_more_and_the_fewest_flow_counts() -> None:
    tooth = list(np.linspace(50, 100, 20))
    sawtooth = tooth * 3  # 100 -> 50 twice
    flat = [80.0] * 60
    assert compare.pattern_count(_series(sawtooth), "sawtooth") == 2
    both = pd.concat([_series(sawtooth, 0), _series(flat, 1)])
    assert compare.pattern_count(both, "sawtooth") == 0


@pytest.fixture(scope="module")
def mixed_result() -> RunResult:
    case = quick_set().cases[-1]
    return get_engine("sim").run(case.scenario())


def _scaled(result: RunResult, goodput_factor: float, retrans_factor: float) -> RunResult:
    other = copy.deepcopy(result)
    other.flows["goodput_mbps"] = other.flows["goodput_mbps"] * goodput_factor
    other.flows["retrans_segments"] = (other.flows["retrans_segments"] * retrans_factor).round().astype("int64")
    return other


def test_a_run_compared_with_itself_has_no_error_and_the_same_winner(mixed_result: RunResult) -> None:
    case = quick_set().cases[-1]
    same = compare.compare_case(case, [mixed_result], [copy.deepcopy(mixed_result)])
    assert same.goodput_error == 0 and same.rtt_error == 0 and same.queue_error_of_limit == 0
    assert same.sim_winner == same.kernel_winner and same.sim_winner in ("bbr", "cubic", "tie")
    if same.sim_retrans:
        assert same.retrans_ratio == 1 and same.retrans_within_factor


def test_goodput_error_and_retransmission_ratio_follow_a_known_difference(mixed_result: RunResult) -> None:
    case = quick_set().cases[-1]
    kernel = _scaled(mixed_result, 0.8, 3.0)
    result = compare.compare_case(case, [mixed_result], [kernel])
    assert result.goodput_error == pytest.approx(0.25, rel=1e-9)  # sim is 1/0.8 = 1.25x kernel
    if mixed_result.flows["retrans_segments"].sum() >= 10:
        assert result.retrans_ratio == pytest.approx(1 / 3, rel=0.1)
        assert result.retrans_within_factor is False


def test_goodput_error_sums_group_differences_so_opposite_shares_do_not_cancel(mixed_result: RunResult) -> None:
    case = quick_set().cases[-1]
    kernel = copy.deepcopy(mixed_result)
    kernel.flows["goodput_mbps"] = kernel.flows["goodput_mbps"].to_numpy()[::-1]  # swap BBR's and CUBIC's goodput
    result = compare.compare_case(case, [mixed_result], [kernel])
    total = float(mixed_result.flows["goodput_mbps"].sum())
    gap = abs(float(np.diff(mixed_result.flows["goodput_mbps"].to_numpy())[0]))
    assert result.sim_goodput_mbps == pytest.approx(result.kernel_goodput_mbps)
    assert result.goodput_error == pytest.approx(2 * gap / total)


def test_a_swapped_share_is_an_error_in_points_of_the_link(mixed_result: RunResult) -> None:
    case = quick_set().cases[-1]
    kernel = copy.deepcopy(mixed_result)
    kernel.flows["goodput_mbps"] = kernel.flows["goodput_mbps"].to_numpy()[::-1]
    result = compare.compare_case(case, [mixed_result], [kernel])
    goodputs = mixed_result.flows["goodput_mbps"].to_numpy()
    assert result.share_error_pts == pytest.approx(100 * abs(goodputs[0] - goodputs[1]) / goodputs.sum())
    assert compare.compare_case(case, [mixed_result], [copy.deepcopy(mixed_result)]).share_error_pts == pytest.approx(0.0)


def test_the_spread_is_the_interquartile_range_across_runs_and_needs_three_of_each(mixed_result: RunResult) -> None:
    case = quick_set().cases[-1]
    kernels = [_scaled(mixed_result, f, 1.0) for f in (0.8, 1.0, 1.2)]
    sims = [copy.deepcopy(mixed_result) for _ in range(3)]
    result = compare.compare_case(case, sims, kernels)
    # Identical simulator runs have no spread; the kernel's groups spread by 0.2 x their goodput.
    assert result.sim_spread_mbps == pytest.approx(0.0)
    assert result.kernel_spread_mbps == pytest.approx(0.2 * mixed_result.flows["goodput_mbps"].mean())
    assert result.spread_within_factor is False
    assert compare.compare_case(case, sims[:2], kernels[:2]).sim_spread_mbps is None
    summary = compare.summarize([result])
    assert summary.spread_cases == 1 and summary.spread_within_share == 0.0


def test_the_rtt_set_covers_rtt_ratios_starved_flows_and_high_bdp_with_half_held_out() -> None:
    rtt = get_set("rtt")
    names = [c.name for c in rtt.cases]
    for ratio in ("rtt1to2", "rtt1to4"):
        for mix in ("2bbr", "2cubic", "bbr+cubic"):
            assert f"{mix}-{ratio}-50M-20ms-1bdp" in names
    assert {"4bbr-rtt1to4-50M-20ms-1bdp", "4cubic-rtt1to4-50M-20ms-1bdp", "3bbr+cubic-50M-40ms-0.5bdp"} <= set(names)
    assert any(c.scenario().bottleneck.rate_mbps >= 300 and c.scenario().bottleneck.rtt_ms >= 100 for c in rtt.cases)
    assert all(c.repetitions >= 3 for c in rtt.cases)
    held = [c for c in rtt.cases if c.held_out]
    assert len(held) == len(rtt.cases) // 2
    # Every case fits the kernel engine's envelope: at most 300 Mbit/s, 20 s.
    assert all(c.scenario().bottleneck.rate_mbps <= 300 and c.scenario().duration_s <= 20 for c in rtt.cases)


def test_repetitions_are_compared_on_their_mean(mixed_result: RunResult) -> None:
    case = quick_set().cases[-1]
    low, high = _scaled(mixed_result, 0.5, 1.0), _scaled(mixed_result, 1.5, 1.0)
    result = compare.compare_case(case, [mixed_result], [low, high])
    assert result.goodput_error == pytest.approx(0.0, abs=1e-9)
    assert result.repetitions == 2


def test_runs_under_random_loss_repeat_so_that_one_draw_does_not_decide() -> None:
    for case in default_set().cases:
        if case.scenario().bottleneck.loss > 0:
            assert case.repetitions >= 3, case.name


def _comparison(name: str, error: float, retrans: tuple[int, int], pair: str | None = None, sim_goodput: float = 10.0) -> compare.CaseComparison:
    ratio = retrans[0] / retrans[1] if retrans[1] else (math.inf if retrans[0] else None)
    return compare.CaseComparison(
        case=name, regime="buffer", pair=pair, sim_goodput_mbps=sim_goodput, kernel_goodput_mbps=sim_goodput / (1 + error),
        goodput_error=error, sim_retrans=retrans[0], kernel_retrans=retrans[1], retrans_ratio=ratio,
        retrans_within_factor=None if ratio is None else 0.5 <= ratio <= 2, sim_queue_mean_bytes=0, kernel_queue_mean_bytes=0,
        queue_limit_bytes=1e5, queue_error_of_limit=0, sim_rtt_mean_ms=20, kernel_rtt_mean_ms=20, rtt_error=0,
    )  # fmt: skip


def test_the_figures_of_merit_are_the_issues_thresholds() -> None:
    errors = [0.01] * 8 + [0.20, 0.30]
    comparisons = [_comparison(f"bbr-n{i}", e, (10, 10) if i < 8 else (10, 50), pair=f"n{i}") for i, e in enumerate(errors)]
    summary = compare.summarize(comparisons)
    assert summary.goodput_median_error == pytest.approx(0.01)
    assert summary.goodput_p90_error == pytest.approx(np.percentile(errors, 90))
    assert summary.retrans_cases == 10 and summary.retrans_within_factor_share == pytest.approx(0.8)
    criteria = summary.criteria()
    assert criteria[0][2] is True  # median 1% <= 5%
    assert criteria[1][2] is False  # p90 = 21%: between the 20% and 30% cases
    assert criteria[2][2] is True  # exactly 80%
    assert criteria[4][2] is None  # no case is there to show a pattern: nothing to judge


def test_a_set_where_neither_engine_retransmitted_has_no_retransmission_verdict() -> None:
    # A receive-window-limited case never loses: nothing to judge, not a failure.
    criteria = compare.summarize([_comparison("cubic-capped", 0.005, (0, 0))]).criteria()
    assert criteria[2][1:] == ("no case with any", None)


def test_pairs_of_one_flow_cases_name_each_engines_winner() -> None:
    pair = [
        _comparison("bbr-x", 0.0, (0, 0), pair="x", sim_goodput=40.0),
        _comparison("cubic-x", 0.0, (0, 0), pair="x", sim_goodput=10.0),
    ]
    pair[1].kernel_goodput_mbps = 45.0  # the kernel's CUBIC beats its BBR (40)
    checks = compare.winner_checks(pair)
    assert [(c.name, c.sim, c.kernel, c.agrees) for c in checks] == [("x", "bbr (+75.0%)", "cubic (-11.1%)", False)]


@pytest.mark.parametrize(
    ("sim_margin", "kernel_margin", "agrees"),
    [(0.30, 0.02, True), (0.037, 0.065, True), (0.03, -0.04, True), (0.03, -0.08, False), (-0.2, 0.2, False)],
)
def test_engines_agree_when_the_same_cc_is_ahead_or_both_call_a_tie(sim_margin: float, kernel_margin: float, agrees: bool) -> None:
    assert compare.WinnerCheck("x", sim_margin, kernel_margin).agrees is agrees


def test_validate_with_an_unknown_set_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "validate"
    done = run_cli("validate", "--set", "nope", "--out", out)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: --set: unknown validation set 'nope'; one of default, bbr23, aqm, rtt, host, all, quick"]
    assert not out.exists()


def test_the_bbr23_set_covers_one_flow_loss_shallow_mixed_and_several_flows_for_both_versions() -> None:
    scenarios = {c.name: c.scenario() for c in get_set("bbr23").cases}
    for bbr in ("bbr2", "bbr3"):
        alone = [s for s in scenarios.values() if [f.cc for f in s.flows] == [bbr]]
        assert any(s.bottleneck.loss >= 0.05 for s in alone), "random loss past the 2% threshold"
        assert any(s.bottleneck.loss == 0 and s.resolve()["bottleneck"]["queue_limit_bytes"] < 0.3 * s.bottleneck.rate_bps * s.bottleneck.rtt_ms / 8e3 for s in alone)
        assert any(len(s.resolve()["flows"]) >= 2 and {f.cc for f in s.flows} == {bbr} for s in scenarios.values())
    assert any({f.cc for f in s.flows} == {"bbr3", "cubic"} for s in scenarios.values())
    assert max(s.bottleneck.rate_mbps for s in scenarios.values()) <= KERNEL_FAITHFUL_RATE_MBPS


def test_the_aqm_set_runs_every_queue_discipline_and_ecn_on_and_off() -> None:
    scenarios = [c.scenario() for c in get_set("aqm").cases]
    # Every queue discipline the spec knows (AQM_NAMES) has a case.
    assert {s.bottleneck.aqm for s in scenarios} == set(AQM_NAMES)
    codel_ecn = [s for s in scenarios if s.bottleneck.aqm == "codel" and s.bottleneck.aqm_params and s.bottleneck.aqm_params.ecn]
    assert {f.ecn for s in codel_ecn for f in s.flows} == {True, False}
    assert all(c.regime == "aqm" for c in get_set("aqm").cases)


def test_the_host_set_holds_each_host_setting_beside_its_default() -> None:
    configs = {c.name: c.scenario().resolve() for c in get_set("host").cases}
    assert {c.get("host", {}).get("loss_recovery", "rack") for c in configs.values()} == {"rack", "classic"}
    assert any(c.get("host", {}).get("tcp_rmem_max_bytes") == 512 * 1024 for c in configs.values())
    assert any(c.get("host", {}).get("tcp_wmem_max_bytes") == 512 * 1024 for c in configs.values())
    # iperf3 -w: both buffers of a bulk flow at once, as the kernel engine can set them.
    set_buffers = [f for c in configs.values() for f in c["flows"] if "sndbuf_bytes" in f]
    assert set_buffers and all(f["sndbuf_bytes"] == f["rcvbuf_bytes"] == 128 * 1024 for f in set_buffers)
    assert {c.get("host", {}).get("access_rate_bps") for c in configs.values()} >= {100_000_000, 10_000_000_000}
    assert any(c.get("host", {}).get("mtu_bytes") == 9000 for c in configs.values())
    # The two recovery cases differ in that setting alone.
    rack, classic = configs["cubic-50M-40ms-1pct-rack"], configs["cubic-50M-40ms-1pct-classic"]
    assert {k: v for k, v in classic.items() if k != "host"} == rack
    assert {c.name for c in get_set("host").cases} <= {c.name for c in get_set("all").cases}


def test_sojourn_agreement_allows_2_ms_or_25_percent() -> None:
    close = replace(_comparison("x", 0.0, (1, 1)), regime="aqm", sim_sojourn_p50_ms=4.0, kernel_sojourn_p50_ms=5.9)
    far = replace(close, sim_sojourn_p50_ms=300.0, kernel_sojourn_p50_ms=200.0)
    near_big = replace(close, sim_sojourn_p50_ms=240.0, kernel_sojourn_p50_ms=200.0)
    assert close.sojourn_agrees and not far.sojourn_agrees and near_big.sojourn_agrees
    summary = compare.summarize([close, far])
    assert summary.sojourn_cases == 2 and summary.sojourn_agreement_share == 0.5
    def sojourn_met(summary: compare.SetSummary) -> bool | None:
        return next(met for name, _, met in summary.criteria() if name.startswith("median queueing delay"))

    assert sojourn_met(summary) is False
    assert sojourn_met(compare.summarize([replace(close, regime="buffer")])) is None


def test_cases_long_enough_are_also_compared_over_their_steady_state_window_and_short_ones_are_not(mixed_result: RunResult) -> None:
    from cclab.fidelity.sets import Case

    spec = {"duration_s": 20, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20}, "flows": [{"cc": "bbr"}, {"cc": "cubic"}]}
    case = Case("bbr+cubic-20s", "flows", spec)
    sim = get_engine("sim").run(case.scenario())
    kernel = copy.deepcopy(sim)
    # The "kernel" delivers 20% less in the last half of the run only.
    late = kernel.flow_series["time_s"] > 10
    kernel.flow_series.loc[late, "throughput_mbps"] *= 0.8
    result = compare.compare_case(case, [sim], [kernel])
    assert result.steady_from_s == 10
    assert result.goodput_error == 0  # the whole-run goodputs are the same
    assert result.steady_goodput_error == pytest.approx(0.25, rel=1e-9)
    assert result.sim_converged is not None or sim.steady_state["reason"]
    summary = compare.summarize([result])
    assert summary.steady_cases == 1 and "25.0%" in summary.steady_line()
    short = compare.compare_case(quick_set().cases[-1], [mixed_result], [copy.deepcopy(mixed_result)])
    assert short.steady_from_s is None and short.steady_goodput_error is None
