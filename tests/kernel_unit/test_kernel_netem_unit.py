"""The netem path's pure parts: limit, tc command, mechanism choice, stats parsing, validity.

None of these need root or sch_netem; they run everywhere.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from types import SimpleNamespace

import pytest

from cclab.engines.kernel import KernelEngineError, assemble, netem, probes

NO_NETEM = netem.NetemProbe(False, "Error: Specified qdisc kind is unknown.", "not set")
HAS_NETEM = netem.NetemProbe(True, "a netem qdisc was accepted in a scratch namespace", "m")


def _never_probed() -> netem.NetemProbe:
    raise AssertionError("netem must not be probed when the delay line was asked for")


# --- the limit ----------------------------------------------------------------------------


def test_limit_at_1_gbit_and_200_ms_holds_four_times_every_ack_in_flight() -> None:
    # 1e9 / (1514 * 8) frames/s x 0.2 s = 16,513 frames; one ACK each at most.
    assert netem.acks_in_flight(1_000_000_000, 200_000_000) == 16_513
    assert netem.netem_limit_pkts(1_000_000_000, 200_000_000) == 4 * 16_513


def test_tcs_default_limit_would_drop_acks_where_the_seed_saw_bbr_collapse() -> None:
    # Seed 004: with netem's default limit BBR reached 12% of 1 Gbit/s x 200 ms.
    assert netem.acks_in_flight(1_000_000_000, 200_000_000) > netem.TC_DEFAULT_LIMIT_PKTS
    assert netem.netem_limit_pkts(1_000_000_000, 200_000_000) > netem.TC_DEFAULT_LIMIT_PKTS


def test_limit_is_never_below_tcs_default_on_small_paths() -> None:
    assert netem.acks_in_flight(10_000_000, 5_000_000) == 5
    assert netem.netem_limit_pkts(10_000_000, 5_000_000) == netem.TC_DEFAULT_LIMIT_PKTS


def test_limit_grows_with_rate_and_with_delay() -> None:
    base = netem.netem_limit_pkts(500_000_000, 100_000_000)
    assert netem.netem_limit_pkts(1_000_000_000, 100_000_000) > base
    assert netem.netem_limit_pkts(500_000_000, 200_000_000) > base


# --- the tc command and where it goes -------------------------------------------------------


def test_netem_command_is_a_constant_delay_in_nanoseconds_with_the_limit_and_nothing_else() -> None:
    args = netem.netem_add_args("s1", 25_000_123, 4242)
    assert args == [
        "tc", "qdisc", "add", "dev", "s1", "root", "handle", "2:",
        "netem", "delay", "25000123ns", "limit", "4242",
    ]  # fmt: skip
    # no jitter (would reorder), no loss (iptables does it), no rate (tbf does it)
    assert not {"loss", "rate", "reorder", "distribution", "duplicate"} & set(args)


def test_netem_command_refuses_a_zero_delay_or_limit() -> None:
    with pytest.raises(ValueError):
        netem.netem_add_args("s0", 0, 1000)
    with pytest.raises(ValueError):
        netem.netem_add_args("s0", 1_000_000, 0)


def test_install_puts_one_netem_per_flow_on_the_router_and_none_on_any_sender(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, tuple[str, ...]]] = []
    monkeypatch.setattr(netem, "ns_run", lambda ns, *args, **_kw: calls.append((ns, args)) or "")

    class FakeIPRoute:
        def link_lookup(self, ifname: str) -> list[int]:
            return [100 + int(ifname[1:])]

    monkeypatch.setattr(netem, "iproute_in", lambda ns: contextlib.nullcontext(FakeIPRoute()))
    delays = [20_000_000, 50_000_000]
    installed = netem.install("cclab-x-r", ["s0", "s1"], delays, 100_000_000)
    assert {ns for ns, _ in calls} == {"cclab-x-r"}
    assert [args[4] for _, args in calls] == ["s0", "s1"]  # dev <router interface towards sender i>
    assert [args[args.index("delay") + 1] for _, args in calls] == ["20000000ns", "50000000ns"]
    assert [q.ifindex for q in installed] == [100, 101]
    assert [q.limit_pkts for q in installed] == [netem.netem_limit_pkts(100_000_000, d) for d in delays]


# --- choosing the mechanism ----------------------------------------------------------------


def test_auto_picks_netem_where_the_probe_finds_it() -> None:
    choice = netem.choose({}, environ={}, probe=lambda: HAS_NETEM)
    assert (choice.mechanism, choice.requested, choice.source) == ("netem", "auto", "default")
    assert choice.provenance_name == "netem"


def test_auto_falls_back_to_the_delay_line_where_netem_is_missing() -> None:
    choice = netem.choose({}, environ={}, probe=lambda: NO_NETEM)
    assert choice.mechanism == "delayline"
    assert choice.provenance_name == "nfqueue-delay-line"
    assert choice.probe == NO_NETEM


def test_asking_for_the_delay_line_never_probes_netem() -> None:
    choice = netem.choose({}, environ={"CCLAB_DELAY": "delayline"}, probe=_never_probed)
    assert (choice.mechanism, choice.source) == ("delayline", "environment CCLAB_DELAY")


def test_explicit_netem_without_netem_fails_in_one_line_naming_the_setting() -> None:
    with pytest.raises(KernelEngineError) as info:
        netem.choose({}, environ={"CCLAB_DELAY": "netem"}, probe=lambda: NO_NETEM)
    line = info.value.line
    assert "\n" not in line
    assert "CCLAB_DELAY=netem" in line and "sch_netem" in line and "qdisc kind is unknown" in line


def test_the_config_key_wins_over_the_environment() -> None:
    choice = netem.choose({"delay_mechanism": "delayline"}, environ={"CCLAB_DELAY": "netem"}, probe=_never_probed)
    assert (choice.mechanism, choice.source) == ("delayline", "config delay_mechanism")
    with pytest.raises(KernelEngineError, match="delay_mechanism=netem"):
        netem.choose({"delay_mechanism": "netem"}, environ={}, probe=lambda: NO_NETEM)


def test_an_unknown_mechanism_is_refused_with_the_allowed_values() -> None:
    with pytest.raises(KernelEngineError, match="auto, netem, delayline"):
        netem.choose({}, environ={"CCLAB_DELAY": "tc"}, probe=lambda: HAS_NETEM)


# --- netem counters from rtnetlink ---------------------------------------------------------


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _qdisc_message(ifindex: int, kind: str, packets: int, drops: int, qlen: int) -> bytes:
    """An RTM_NEWQDISC payload as the kernel sends it (struct tcmsg + TCA_KIND + TCA_STATS2)."""
    tcmsg = struct.pack("=BxxxiIII", socket.AF_UNSPEC, ifindex, 0x20000, 0xFFFFFFFF, 1)
    basic = struct.pack("=QIxxxx", packets * 66, packets)  # struct gnet_stats_basic
    queue = struct.pack("=IIIII", qlen, qlen * 66, drops, 0, 0)  # struct gnet_stats_queue
    stats2 = _attr(probes.TCA_STATS_BASIC, basic) + _attr(probes.TCA_STATS_QUEUE, queue)
    return tcmsg + _attr(probes.TCA_KIND, kind.encode() + b"\0") + _attr(probes.TCA_STATS2, stats2)


def test_netem_drop_counter_is_read_from_the_qdiscs_netlink_stats() -> None:
    msg = _qdisc_message(7, "netem", packets=12_345, drops=3, qlen=40)
    stats = probes.parse_qdisc_stats(msg, 7, "netem")
    assert stats == probes.QdiscStats(bytes=12_345 * 66, packets=12_345, backlog_bytes=40 * 66, qlen=40, drops=3)


def test_stats_of_another_interface_or_qdisc_kind_are_ignored() -> None:
    msg = _qdisc_message(7, "netem", packets=1, drops=0, qlen=0)
    assert probes.parse_qdisc_stats(msg, 8, "netem") is None
    assert probes.parse_qdisc_stats(msg, 7, "tbf") is None


def test_the_stats_request_asks_for_a_qdisc_dump_of_one_interface() -> None:
    req = probes.qdisc_stats_request(9)
    length, kind, flags = struct.unpack_from("=IHH", req, 0)
    assert (length, kind) == (len(req), probes.RTM_GETQDISC)
    assert flags & probes.NLM_F_DUMP == probes.NLM_F_DUMP
    assert struct.unpack_from("=i", req, 16 + 4)[0] == 9


# --- validity adapts to the mechanism ------------------------------------------------------


def _netem_measured(drops: list[int | None]) -> SimpleNamespace:
    qdiscs = [netem.NetemQdisc(i, f"s{i}", 10 + i, 20_000_000, 1000, 100) for i in range(len(drops))]
    stats = {
        f"s{i}": None if d is None else probes.QdiscStats(bytes=0, packets=500, backlog_bytes=0, qlen=0, drops=d)
        for i, d in enumerate(drops)
    }
    # No delay-line report and no lateness: with netem those checks must not run.
    return SimpleNamespace(delay_mechanism="netem", netem_qdiscs=qdiscs, netem_stats=stats,
                           delay_report=None, delay_line_died=False, rtt_ns=20_000_000)  # fmt: skip


def test_with_netem_a_run_without_netem_drops_has_no_delay_reasons() -> None:
    assert assemble.delay_reasons(_netem_measured([0, 0])) == []


def test_with_netem_any_netem_drop_or_vanished_qdisc_makes_the_run_invalid() -> None:
    reasons = assemble.delay_reasons(_netem_measured([0, 17, None]))
    assert len(reasons) == 2
    assert "s1 dropped 17 packets (limit 1000)" in reasons[0]
    assert "s2 disappeared" in reasons[1]


def test_with_the_delay_line_a_missing_report_is_still_a_reason() -> None:
    m = _netem_measured([0])
    m.delay_mechanism = "delayline"
    assert assemble.delay_reasons(m) == ["the delay line wrote no report"]


def test_a_tc_failure_while_installing_netem_is_one_engine_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_tc(ns: str, *args: str, **_kw: object) -> str:
        raise RuntimeError(f"{' '.join(args)} in {ns} failed: Error: Specified qdisc kind is unknown.")

    monkeypatch.setattr(netem, "ns_run", failing_tc)
    monkeypatch.setattr(netem, "iproute_in", lambda ns: contextlib.nullcontext(None))
    with pytest.raises(KernelEngineError, match="router interface s0: tc qdisc add") as info:
        netem.install("cclab-x-r", ["s0"], [20_000_000], 100_000_000)
    assert "\n" not in info.value.line
