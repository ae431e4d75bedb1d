"""The permutation test of run-to-run spreads (cclab.fidelity.spread) and what `validate` makes of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cclab.fidelity import compare
from cclab.fidelity.runner import _plan, with_repetitions
from cclab.fidelity.sets import get_set
from cclab.fidelity.spread import spread_test
from conftest import run_cli


def _runs(*groups: list[float]) -> pd.DataFrame:
    """Goodput per group (rows) and run (columns)."""
    return pd.DataFrame(list(groups), index=[f"g{i}" for i in range(len(groups))])


def test_a_shift_in_location_is_not_a_difference_in_spread() -> None:
    sim = _runs([20.7, 22.5, 23.5, 26.5, 30.4])
    test = spread_test(sim, sim + 7.0, 2.0)
    assert test.p_value == pytest.approx(1.0)


def test_a_nearly_noiseless_engine_against_a_noisy_one_differs_at_five_runs() -> None:
    # 5 + 5 runs: 252 splits. Beside the observed one and its mirror, the splits that swap
    # the kernel's median run (centred to 0) for one of the simulator's are as extreme.
    test = spread_test(_runs([30.0, 30.01, 29.99, 30.02, 29.98]), _runs([20.0, 40.0, 25.0, 35.0, 30.0]), 2.0)
    assert test.splits == 252
    assert test.p_value == pytest.approx(12 / 252)
    assert test.p_value < compare.SPREAD_TEST_LEVEL
    # Each engine's median run centres to 0, so at best two splits tie with each extreme one.
    assert test.min_p_value == pytest.approx(4 / 252)


def test_three_runs_an_engine_cannot_tell_spreads_apart() -> None:
    # 3 + 3 runs: 20 splits, so no p below 4/20 (as above), whatever the data.
    test = spread_test(_runs([30.0, 30.01, 29.99]), _runs([20.0, 40.0, 30.0]), 2.0)
    assert test.min_p_value == pytest.approx(0.2)
    assert test.min_p_value > compare.SPREAD_TEST_LEVEL


def test_two_samples_of_one_spread_land_within_2x_about_half_the_time_at_five_runs() -> None:
    # The documented reason the 2x-IQR criterion needs a baseline: for normal samples of
    # five, the chance is about 0.56 (and 0.80 at ten).
    rng = np.random.default_rng(7)
    shares = [spread_test(_runs(list(rng.normal(size=5))), _runs(list(rng.normal(size=5))), 2.0).null_within_share for _ in range(40)]
    assert 0.35 < float(np.mean(shares)) < 0.65
    shares_10 = [spread_test(_runs(list(rng.normal(size=10))), _runs(list(rng.normal(size=10))), 2.0).null_within_share for _ in range(10)]
    assert float(np.mean(shares_10)) > float(np.mean(shares))


def test_many_runs_are_split_by_a_seeded_subset_that_replays() -> None:
    rng = np.random.default_rng(3)
    sim, kernel = _runs(list(rng.normal(size=10)), list(rng.normal(size=10))), _runs(list(4 * rng.normal(size=10)), list(4 * rng.normal(size=10)))
    first, again = spread_test(sim, kernel, 2.0), spread_test(sim, kernel, 2.0)
    assert first.splits == 4096 and first == again
    assert first.p_value < 0.05  # a 4x spread over ten runs is found


def test_validate_counts_only_cases_whose_run_counts_let_the_test_reject() -> None:
    def case(p: float, min_p: float) -> compare.CaseComparison:
        c = compare.CaseComparison(
            case="c", regime="rtt", pair=None, sim_goodput_mbps=1.0, kernel_goodput_mbps=1.0, goodput_error=0.0,
            sim_retrans=0, kernel_retrans=0, retrans_ratio=None, retrans_within_factor=None,
            sim_queue_mean_bytes=0.0, kernel_queue_mean_bytes=0.0, queue_limit_bytes=1.0, queue_error_of_limit=0.0,
            sim_rtt_mean_ms=20.0, kernel_rtt_mean_ms=20.0, rtt_error=0.0,
        )  # fmt: skip
        c.sim_spread_mbps, c.kernel_spread_mbps = 1.0, 1.0
        c.spread_p_value, c.spread_min_p_value, c.spread_null_within_share = p, min_p, 0.5
        return c

    summary = compare.summarize([case(0.01, 0.008), case(0.5, 0.008), case(0.1, 0.1)])
    assert (summary.spread_tested_cases, summary.spread_differing_cases) == (2, 1)
    assert summary.spread_null_within_share == pytest.approx(0.5)
    criterion = next(c for c in summary.criteria() if c[0].startswith("run-to-run spread not distinguishable"))
    assert criterion[1] == "1 of 2 differ" and criterion[2] is False


def test_more_repetitions_extend_only_the_repetition_cases_and_reuse_their_first_runs() -> None:
    for name in ("rtt", "default"):
        base = get_set(name)
        more = with_repetitions(base, 10)
        for before, after in zip(base.cases, more.cases, strict=True):
            expected = 10 if before.repetitions >= compare.SPREAD_MIN_REPETITIONS else before.repetitions
            assert after.repetitions == expected, after.name
    rtt = get_set("rtt")
    first, extended = _plan(rtt.cases, "kernel"), _plan(with_repetitions(rtt, 10).cases, "kernel")
    for case in rtt.cases:
        keys = [spec.run_key for spec in extended[case.name]]
        assert keys[: case.repetitions] == [spec.run_key for spec in first[case.name]]
        assert len(set(keys)) == 10  # each further run its own seed


def test_validate_refuses_fewer_than_one_repetition_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "v"
    result = run_cli("validate", "--set", "quick", "--repetitions", "0", "--out", out)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: --repetitions 0: must be at least 1"]
    assert not out.exists()
