"""Links that change: `[[bottleneck.schedule]]` and Mahimahi traces in the spec, the shipped
example traces, how the kernel engine splits a schedule, and the changing-links study."""

from __future__ import annotations

from pathlib import Path

import pytest

import cclab
from cclab.errors import CclabError, SpecError
from cclab.spec import Scenario
from cclab.spec.link import constant_rate_trace_ms, mean_rate_bps, read_trace_ms
from cclab.studies import get_study
from cclab.studies.changing_links import cellular_like_trace_ms, step_trace_ms

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def spec(**bottleneck: object) -> dict:
    return {"duration_s": 10, "bottleneck": {"rtt_ms": 20, **bottleneck}, "flows": [{"cc": "cubic"}]}


def test_a_schedule_resolves_to_integer_changes_and_a_fixed_link_keeps_its_config() -> None:
    config = Scenario.from_dict(spec(rate_mbps=50, schedule=[{"at_s": 2, "rate_mbps": 10}, {"at_s": 4.5, "rtt_ms": 80, "loss": 0.01}])).resolve()
    assert config["bottleneck"]["schedule"] == [
        {"at_ns": 2_000_000_000, "rate_bps": 10_000_000, "rtt_ns": None, "loss_probability": None},
        {"at_ns": 4_500_000_000, "rate_bps": None, "rtt_ns": 80_000_000, "loss_probability": 0.01},
    ]
    # Without a schedule or trace nothing is added, so earlier sweeps' run keys still match.
    fixed = Scenario.from_dict(spec(rate_mbps=50)).resolve()["bottleneck"]
    assert "schedule" not in fixed and "trace_ms" not in fixed


@pytest.mark.parametrize(
    ("bottleneck", "message"),
    [
        ({"rate_mbps": 50, "schedule": [{"at_s": 12, "rate_mbps": 5}]}, r"^bottleneck\.schedule\[0\]\.at_s: must be < duration_s \(10\)"),
        ({"rate_mbps": 50, "schedule": [{"at_s": 3, "loss": 0.1}, {"at_s": 1, "loss": 0}]}, r"^bottleneck\.schedule\[1\]\.at_s: changes must be in time order"),
        ({"rate_mbps": 50, "schedule": [{"at_s": 3}]}, r"^bottleneck\.schedule\[0\]: must change at least one of"),
        ({"rate_mbps": 50, "schedule": [{"at_s": 3, "rtt_ms": 1e6}]}, r"^bottleneck\.schedule\[0\]\.rtt_ms: must be in"),
        ({"rate_mbps": 50, "schedule": [{"at_s": 3, "rate": 5}]}, r"^bottleneck\.schedule\[0\]\.rate: unknown key"),
        ({}, r"^bottleneck\.rate_mbps: required key is missing \(or give a trace\)"),
        ({"trace": "/nonexistent/x.trace"}, r"^bottleneck\.trace: no such file"),
    ],
)
def test_a_bad_schedule_or_trace_is_one_line_naming_the_field(bottleneck: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        Scenario.from_dict(spec(**bottleneck))


def test_a_trace_sets_the_rate_and_is_read_beside_the_spec_file(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.trace").write_text("1\n1\n2\n4\n")
    (tmp_path / "s.toml").write_text('duration_s = 1\n[bottleneck]\ntrace = "traces/t.trace"\nrtt_ms = 10\n[[flows]]\ncc = "cubic"\n')
    scenario = Scenario.from_toml(tmp_path / "s.toml")
    # 4 opportunities of 1500 B every 4 ms: 12 Mbit/s.
    assert scenario.bottleneck.rate_bps == 12_000_000
    assert scenario.resolve()["bottleneck"]["trace_ms"] == [1, 1, 2, 4]
    with pytest.raises(SpecError, match=r"^bottleneck\.rate_mbps: a trace sets the rate"):
        Scenario.from_dict(spec(trace=str(tmp_path / "traces" / "t.trace"), rate_mbps=10))
    with pytest.raises(SpecError, match=r"^bottleneck\.schedule\[0\]\.rate_mbps: a trace sets the rate"):
        Scenario.from_dict(spec(trace=str(tmp_path / "traces" / "t.trace"), schedule=[{"at_s": 0.5, "rate_mbps": 5}]))


@pytest.mark.parametrize(("text", "message"), [("1\n2\nx\n", r"t\.trace:3: expected a whole number"), ("5\n3\n", r"t\.trace:2: timestamps must not decrease"), ("0\n0\n", r"needs at least one opportunity after 0 ms")])
def test_a_malformed_trace_names_its_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "t.trace").write_text(text)
    with pytest.raises(SpecError, match=r"^bottleneck\.trace: .*" + message):
        Scenario.from_dict(spec(trace=str(tmp_path / "t.trace")))


def test_the_shipped_traces_are_what_their_generator_writes() -> None:
    assert read_trace_ms(EXAMPLES / "traces" / "step_20_4_20mbit.trace") == step_trace_ms()
    assert read_trace_ms(EXAMPLES / "traces" / "cellular_like.trace") == cellular_like_trace_ms()


def test_a_constant_rate_trace_carries_its_rate_phase_by_phase() -> None:
    times = constant_rate_trace_ms([(20, 10), (4, 10), (20, 10)])
    assert times[-1] == 30_000
    per_phase = [sum(1 for t in times if lo < t <= hi) for lo, hi in ((0, 10_000), (10_000, 20_000), (20_000, 30_000))]
    # 20 Mbit/s for 10 s is 16,666 whole 1500-byte opportunities, 4 Mbit/s 3,333.
    assert per_phase == [16_666, 3_333, 16_666]
    assert mean_rate_bps(times) == pytest.approx(44e6 / 3, rel=1e-3)


def test_the_link_examples_run_on_the_simulator() -> None:
    dip = cclab.run(EXAMPLES / "rate_dip_5x_cubic_50mbit_40ms.toml")
    series = dip.flow_series
    in_dip = series[(series.time_s > 12) & (series.time_s <= 20)]["throughput_mbps"].mean()
    assert 8 < in_dip <= 10 * 1448 / 1514 * 1.02
    trace = cclab.run(EXAMPLES / "cellular_trace_bbr3_40ms.toml")
    assert 0.5 < trace.bottleneck["utilization"] <= 1.0


def test_the_link_offers_its_rate_piecewise_or_its_trace_as_full_frames() -> None:
    from cclab.engines.kernel.link_changes import offered_bits

    link = {"rate_bps": 50_000_000, "schedule": [{"at_ns": 2_000_000_000, "rate_bps": 10_000_000}, {"at_ns": 4_000_000_000, "rtt_ns": 1}]}
    assert offered_bits(link, 0, 3) == pytest.approx(50e6 * 2 + 10e6 * 1)
    assert offered_bits(link, 2.5, 10) == pytest.approx(10e6 * 7.5)
    trace = {"rate_bps": 12_000_000, "trace_ms": [1, 1, 2, 4]}
    # Opportunities at 1, 1, 2, 4 ms, then at 5, 5, 6, 8 ms as the trace repeats: 7 by 6 ms.
    assert offered_bits(trace, 0, 0.006) == 7 * 1514 * 8
    assert offered_bits(trace, 0.002, 0.006) == 4 * 1514 * 8


def test_the_delay_line_gets_its_part_of_the_schedule_in_absolute_time(tmp_path: Path) -> None:
    import signal

    from cclab.engines.kernel.link_changes import LinkChanger, netem_change_args

    sent: list[int] = []

    class FakeProc:
        def send_signal(self, sig: int) -> None:
            sent.append(sig)

    class FakeDelayLine:
        proc = FakeProc()

    config = {"bottleneck": {"rate_bps": 50_000_000, "rtt_ns": 20_000_000, "schedule": [
        {"at_ns": 3_000_000_000, "rate_bps": 10_000_000, "rtt_ns": 60_000_000, "loss_probability": None}]},
        "flows": [{"extra_rtt_ns": 0}, {"extra_rtt_ns": 40_000_000}]}  # fmt: skip
    changer = LinkChanger(config, topo=None, ports=[], userspace=True, delay_line=FakeDelayLine(), queue_of_flow=[0, 1], workdir=tmp_path)
    changer._send_to_delay_line(config["bottleneck"], t0_realtime_ns=1_000)
    written = __import__("json").loads((tmp_path / "schedule.json").read_text())
    assert written == {"trace": None, "changes": [
        {"at_ns": 3_000_001_000, "rate": {"rate_bps": 10_000_000, "burst_bytes": 15_140}, "delays": [[0, 60_000_000], [1, 100_000_000]]}]}  # fmt: skip
    assert sent == [signal.SIGUSR1]
    # With the userspace bottleneck the rate is the delay line's, so no thread is needed for it.
    assert not changer._thread_part(config["bottleneck"]["schedule"][0])
    assert netem_change_args("s0", 60_000_000, 1000)[:3] == ["tc", "qdisc", "change"]


@pytest.mark.sim
def test_changing_links_quick_measures_recovery_and_trace_goodput_for_each_cc(tmp_path: Path) -> None:
    summary = get_study("changing-links").run(tmp_path, quick=True).read_text()
    for cc in ("BBRv1", "BBRv3", "CUBIC"):
        assert summary.count(f"| {cc} |") == 3  # the dip, and the two traces
    for figure in ("dip", "trace_step", "trace_cellular"):
        assert (tmp_path / f"{figure}.png").is_file() and (tmp_path / f"{figure}.svg").is_file()
    dip_table = summary.split("## A 5x rate dip")[1].split("\n\n")[1]
    rows = [line.split("|")[1:-1] for line in dip_table.splitlines()[2:]]
    for row in rows:
        before, in_dip = float(row[1]), float(row[2])
        # Each CC used the full link before the dip and followed the rate down into it (a 100 ms
        # sample may exceed the link when data held out of order is delivered at once, so the
        # window's mean is compared with the rate before, not held to the dip's rate).
        assert before > 40 and 5 < in_dip < before / 3


def test_a_rate_or_delay_change_applied_late_is_a_host_timing_reason_and_a_late_loss_rule_is_not() -> None:
    from cclab.engines.kernel.link_changes import MAX_CHANGE_LATENESS_MS, lateness_reasons

    late = MAX_CHANGE_LATENESS_MS + 5
    report = {"changes": [{"at_s": 3.0, "late_ms": late, "by": "tc tbf"}, {"at_s": 6.0, "late_ms": late, "by": "iptables"},
                          {"at_s": 3.0, "late_ms": 0.4, "by": "cclab-delayline"}, {"at_s": 6.0, "late_ms": 4.0, "by": "tc tbf"}]}  # fmt: skip
    reasons = lateness_reasons(report)
    assert len(reasons) == 1 and reasons[0].startswith("link change at 3 s applied 55 ms late by tc tbf")
    assert "lateness" in reasons[0]  # what the kernel tests rerun a run for (host timing)
