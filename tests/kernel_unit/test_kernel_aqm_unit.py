"""The AQM's two paths without running them: which one is chosen, the tc command of the
kernel path, its counters read from `tc -s -j` output, and the userspace bottleneck's
arguments. The `tc -s -j qdisc show dev rx` fixtures below follow iproute2's printers
(tc/tc_qdisc.c print_qdisc, tc/tc_util.c print_tcstats2_attr, tc/q_<kind>.c print_opt and
print_xstats: key names, which keys appear only when set, times in microseconds)."""

from __future__ import annotations

import json
import struct

import pytest

from cclab.engines.kernel import aqm, probes
from cclab.engines.kernel.delayline import bottleneck_args
from cclab.engines.kernel.errors import KernelEngineError
from cclab.spec.aqm import AqmParams, resolve_aqm
from cclab.units import FRAME_BYTES

BOTTLENECK = {"rate_bps": 100_000_000, "rtt_ns": 20_000_000, "queue_limit_bytes": 2_500_000, "queue_limit_packets": None}
TBF = {
    "kind": "tbf", "handle": "1:", "root": True, "refcnt": 2,
    "options": {"rate": 12500000, "burst": 31250, "lat": 0},
    "bytes": 3761052016, "packets": 2484182, "drops": 412, "overlimits": 170211, "requeues": 0, "backlog": 0, "qlen": 0,
}  # fmt: skip
COUNTERS = {"bytes": 3761052016, "packets": 2484182, "overlimits": 0, "requeues": 0, "backlog": 0, "qlen": 0}
FQ_CODEL = {
    "kind": "fq_codel", "handle": "10:", "parent": "1:1",
    "options": {"limit": 1651, "flows": 1024, "quantum": 1514, "target": 4999, "interval": 99999,
                "memory_limit": 33554432, "ecn": True, "drop_batch": 64},
    **COUNTERS, "drops": 412, "maxpacket": 1514, "drop_overlimit": 12, "new_flow_count": 37, "ecn_mark": 2211,
    "ce_mark": 5, "memory_used": 0, "drop_overmemory": 0, "new_flows_len": 0, "old_flows_len": 1,
}  # fmt: skip
CODEL = {
    "kind": "codel", "handle": "10:", "parent": "1:1",
    "options": {"limit": 1000, "target": 4999, "interval": 99999},
    **COUNTERS, "drops": 97, "count": 3, "lastcount": 2, "ldelay": 4201, "drop_next": -1204,
    "maxpacket": 1514, "ecn_mark": 0, "drop_overlimit": 7,
}  # fmt: skip
DUALPI2 = {
    "kind": "dualpi2", "handle": "10:", "parent": "1:1",
    "options": {"limit": 1651, "memory-limit": 30280000, "target": 15000, "tupdate": 16000, "alpha": 0.15625,
                "beta": 3.195312, "step-thresh-us": 1000, "min-qlen-step": 0, "coupling": 2, "drop-overload": "drop",
                "drop-early": "drop-dequeue", "c-protection": 10, "ecn-mask": "l4s-ect", "split-gso": None},
    **{**COUNTERS, "overlimits": 20}, "drops": 120, "prob": 0.012, "delay-c": 14210, "delay-l": 310, "pkts-in-c": 90000,
    "pkts-in-l": 120000, "maxq": 180, "ecn-mark": 5300, "step-mark": 4100, "credit": -40, "memory-used": 0,
    "max-memory-used": 410000, "memory-limit": 30280000,
}  # fmt: skip
PIE = {
    "kind": "pie", "handle": "10:", "parent": "1:1",
    "options": {"limit": 1000, "target": 15000, "tupdate": 15000, "alpha": 2, "beta": 20},
    **COUNTERS, "drops": 300, "prob": 0.0132, "delay": 11, "pkts_in": 2484482, "overlimit": 40, "dropped": 260,
    "maxq": 311, "ecn_mark": 0,
}  # fmt: skip
RED = {
    "kind": "red", "handle": "10:", "parent": "1:1",
    "options": {"limit": 2500000, "min": 208333, "max": 625000, "ecn": True, "ewma": 9, "probability": 0.02,
                "Scell_log": 20},
    **COUNTERS, "drops": 51, "marked": 1800, "early": 40, "pdrop": 11, "other": 0,
}  # fmt: skip
CAKE = {
    "kind": "cake", "handle": "10:", "parent": "1:1",
    "options": {"bandwidth": "unlimited", "diffserv": "diffserv3", "flowmode": "triple-isolate", "nat": False,
                "wash": False, "ingress": False, "ack-filter": "disabled", "split_gso": True, "rtt": 100000,
                "raw": True, "overhead": 0, "memlimit": 2500000, "fwmark": "0"},
    **COUNTERS, "drops": 230, "memory_used": 1507328, "memory_limit": 2500000, "capacity_estimate": 0,
    "min_network_size": 60, "max_network_size": 1514, "min_adj_size": 60, "max_adj_size": 1514, "avg_hdr_offset": 14,
    "tins": [
        {"threshold_rate": 0, "sent_bytes": 0, "backlog_bytes": 0, "target_us": 5000, "interval_us": 100000,
         "peak_delay_us": 0, "avg_delay_us": 0, "base_delay_us": 0, "sent_packets": 0, "drops": 0, "ecn_mark": 0},
        {"threshold_rate": 0, "sent_bytes": 3761052016, "backlog_bytes": 0, "target_us": 5000, "interval_us": 100000,
         "peak_delay_us": 9120, "avg_delay_us": 4120, "base_delay_us": 30, "sent_packets": 2484182, "drops": 230,
         "ecn_mark": 4100},
        {"threshold_rate": 0, "sent_bytes": 0, "backlog_bytes": 0, "target_us": 5000, "interval_us": 100000,
         "peak_delay_us": 0, "avg_delay_us": 0, "base_delay_us": 0, "sent_packets": 0, "drops": 0, "ecn_mark": 0},
    ],
}  # fmt: skip


def resolved(kind: str) -> dict:
    return resolve_aqm(kind, None, buffer_bytes=BOTTLENECK["queue_limit_bytes"], rate_bps=BOTTLENECK["rate_bps"])


def config_with(kind: str, **top: object) -> dict:
    return {"bottleneck": {**BOTTLENECK, "aqm": resolved(kind)}, **top}


# --- choosing the path ---------------------------------------------------------------------


def never_probe(kind: str) -> aqm.QdiscProbe:
    raise AssertionError(f"{kind} must not be probed")


def present(kind: str) -> aqm.QdiscProbe:
    return aqm.QdiscProbe(kind, True, "accepted")


def missing(kind: str) -> aqm.QdiscProbe:
    return aqm.QdiscProbe(kind, False, "Error: Specified qdisc kind is unknown.")


def test_fifo_runs_on_the_engines_tbf_without_probing_anything() -> None:
    choice = aqm.choose(config_with("fifo"), environ={}, probe=never_probe, userspace_problem=lambda a: None)
    assert (choice.implementation, choice.probe) == (aqm.KERNEL, None)


def test_an_aqm_the_kernel_has_runs_as_the_kernels_qdisc() -> None:
    choice = aqm.choose(config_with("fq_codel"), environ={}, probe=present, userspace_problem=lambda a: "unused")
    assert choice.implementation == aqm.KERNEL
    assert choice.probe.available


def test_an_aqm_the_kernel_lacks_runs_in_the_userspace_bottleneck() -> None:
    choice = aqm.choose(config_with("codel"), environ={}, probe=missing, userspace_problem=lambda a: None)
    assert choice.implementation == aqm.CCLAB
    assert "not in this kernel" in choice.why


def test_an_aqm_that_can_run_nowhere_is_refused_in_one_line_naming_both_reasons() -> None:
    with pytest.raises(KernelEngineError) as error:
        aqm.choose(config_with("pie"), environ={}, probe=missing, userspace_problem=lambda a: "cclab-delayline is not built")
    line = error.value.line
    assert error.value.exit_code == 2  # refused before anything exists, like any bad config
    assert "\n" not in line
    assert "sch_pie" in line and "cclab-delayline is not built" in line


def test_asking_for_the_kernel_qdisc_where_it_is_missing_is_refused() -> None:
    with pytest.raises(KernelEngineError, match="no sch_cake"):
        aqm.choose(config_with("cake"), environ={aqm.ENV: "kernel"}, probe=missing, userspace_problem=lambda a: None)


def test_the_config_key_wins_over_the_environment_and_forces_the_userspace_fifo() -> None:
    config = config_with("fifo", aqm_implementation="cclab")
    choice = aqm.choose(config, environ={aqm.ENV: "kernel"}, probe=never_probe, userspace_problem=lambda a: None)
    assert choice.implementation == aqm.CCLAB
    assert choice.source == "config aqm_implementation"


def test_an_unknown_implementation_name_is_refused() -> None:
    with pytest.raises(KernelEngineError, match="must be one of"):
        aqm.choose(config_with("fifo"), environ={aqm.ENV: "userspace"}, probe=never_probe)


# --- the kernel path's tc command ------------------------------------------------------------


def test_fq_codel_hangs_under_tbf_with_every_parameter_and_the_buffer_as_its_packet_limit() -> None:
    args, how = aqm.kernel_qdisc_args("rx", resolved("fq_codel"), BOTTLENECK, 100_000_000, FRAME_BYTES)
    # 2.5 MB buffer = 1651 full frames, below fq_codel's own limit of 10240.
    assert args == [
        "tc", "qdisc", "add", "dev", "rx", "parent", "1:1", "handle", "10:", "fq_codel",
        "limit", "1651", "flows", "1024", "target", "5000us", "interval", "100000us", "quantum", "1514",
        "memory_limit", "33554432", "drop_batch", "64", "ecn",
    ]  # fmt: skip
    assert "no byte limit" in how


def test_codel_keeps_its_own_limit_when_the_buffer_is_larger_and_passes_ce_threshold() -> None:
    params = {**resolved("codel"), "ce_threshold_ns": 1_500_000}
    args, _ = aqm.kernel_qdisc_args("rx", params, BOTTLENECK, 100_000_000, FRAME_BYTES)
    assert args[10:] == ["limit", "1000", "target", "5000us", "interval", "100000us", "noecn", "ce_threshold", "1500us"]


def test_pie_and_red_take_their_flags_and_red_its_byte_limit_from_the_buffer() -> None:
    pie, _ = aqm.kernel_qdisc_args("rx", {**resolved("pie"), "ecn": True}, BOTTLENECK, 100_000_000, FRAME_BYTES)
    assert pie[10:] == ["limit", "1000", "target", "15000us", "tupdate", "15000us", "alpha", "2", "beta", "20",
                        "ecn", "nobytemode", "no_dq_rate_estimator"]  # fmt: skip
    red_params = {**resolved("red"), "ecn": True, "limit_bytes": 4_000_000}
    red, how = aqm.kernel_qdisc_args("rx", red_params, BOTTLENECK, 100_000_000, FRAME_BYTES)
    assert red[10:12] == ["limit", "2500000"]
    assert red[red.index("bandwidth") + 1] == "100000000bit"
    assert "ecn" in red and "harddrop" not in red
    assert "bytes" in how


def test_cake_runs_unshaped_under_tbf_with_the_buffer_as_memlimit() -> None:
    args, how = aqm.kernel_qdisc_args("rx", resolved("cake"), BOTTLENECK, 100_000_000, FRAME_BYTES)
    assert args[10:] == ["unlimited", "rtt", "100000us", "triple-isolate", "memlimit", "2500000"]
    assert "truesize" in how


def test_dualpi2_takes_every_parameter_in_tcs_words_with_gains_exact_to_tcs_truncation() -> None:
    args, how = aqm.kernel_qdisc_args("rx", resolved("dualpi2"), BOTTLENECK, 100_000_000, FRAME_BYTES)
    assert args[10:] == [
        "limit", "1651", "memlimit", "30280000", "target", "15000us", "tupdate", "16000us",
        "alpha", "0.16015625", "beta", "3.19921875", "step_thresh", "1000us", "min_qlen_step", "0",
        "coupling_factor", "2", "drop_on_overload", "drop_dequeue", "classic_protection", "10", "l4s_ect",
    ]  # fmt: skip
    # q_dualpi2.c sends (uint32_t)(alpha * 256): the kernel's defaults 41 and 819 come back.
    assert int(float(args[args.index("alpha") + 1]) * 256) == 41 and int(float(args[args.index("beta") + 1]) * 256) == 819
    packets = resolve_aqm("dualpi2", AqmParams(step_thresh_packets=5, ecn_mask="any_ect"), buffer_bytes=2_500_000, rate_bps=100_000_000)
    args, _ = aqm.kernel_qdisc_args("rx", packets, BOTTLENECK, 100_000_000, FRAME_BYTES)
    assert args[args.index("step_thresh") + 1] == "5packets" and args[-1] == "any_ect"


# --- the kernel path's counters --------------------------------------------------------------


@pytest.mark.parametrize(
    ("qdisc", "drops", "overflow", "aqm_drops", "ce"),
    [
        (FQ_CODEL, 412, 12, 400, 2216),  # ecn_mark + ce_mark
        (CODEL, 97, 7, 90, 0),  # no ce_mark key: iproute2 prints it only when set
        (PIE, 300, 40, 260, 0),
        (RED, 51, 11, 40, 1800),
        (CAKE, 230, 0, 230, 4100),
        (DUALPI2, 120, 20, 100, 5300),
    ],
)
def test_tc_json_counters_split_drops_into_overflow_and_aqm_and_count_marks(
    qdisc: dict, drops: int, overflow: int, aqm_drops: int, ce: int
) -> None:
    text = json.dumps([TBF, qdisc])
    c = aqm.counters_from_tc_json(text, qdisc["kind"])
    assert (c.drops, c.overflow_drops, c.aqm_drops, c.ce_marks) == (drops, overflow, aqm_drops, ce)


def test_the_qdiscs_own_delay_figures_are_kept() -> None:
    assert aqm.counters_from_tc_json(json.dumps([TBF, CODEL]), "codel").delay == {"ldelay_us": 4201}
    cake = aqm.counters_from_tc_json(json.dumps([TBF, CAKE]), "cake")
    assert cake.delay["avg_delay_us"] == [0, 4120, 0]
    assert cake.note


def test_a_missing_aqm_qdisc_in_tc_output_is_an_error() -> None:
    with pytest.raises(KernelEngineError, match="no fq_codel"):
        aqm.counters_from_tc_json(json.dumps([TBF]), "fq_codel")


def test_ce_marks_are_read_from_each_qdiscs_raw_xstats_struct() -> None:
    # struct tc_codel_xstats: maxpacket, count, lastcount, ldelay, drop_next, drop_overlimit,
    # ecn_mark, dropping, ce_mark.
    codel = struct.pack("=IIIIiIIII", 1514, 3, 2, 4201, -5, 7, 30, 1, 4)
    assert probes.ce_marks_from_xstats("codel", codel) == 34
    # struct tc_fq_codel_xstats: type 0, then maxpacket, drop_overlimit, ecn_mark, ..., ce_mark.
    fq = struct.pack("=IIIIIIIIII", 0, 1514, 12, 2211, 37, 0, 1, 5, 0, 0)
    assert probes.ce_marks_from_xstats("fq_codel", fq) == 2216
    pie = struct.pack("=QIIIIIIII", 0, 11, 0, 0, 100, 2, 1, 30, 9)
    assert probes.ce_marks_from_xstats("pie", pie) == 9
    assert probes.ce_marks_from_xstats("red", struct.pack("=IIII", 40, 11, 0, 1800)) == 1800
    assert probes.ce_marks_from_xstats("cake", b"\0" * 64) is None
    assert probes.ce_marks_from_xstats("codel", None) is None


# --- the userspace path's arguments ---------------------------------------------------------


def test_the_userspace_bottleneck_gets_the_rate_tbfs_burst_the_buffer_and_the_resolved_aqm() -> None:
    config = {"seed": 7, "queue_sample_interval_ns": 2_000_000, "bottleneck": {**BOTTLENECK, "aqm": resolved("codel")}}
    args = bottleneck_args(1000, config, burst_bytes=31_250)
    opts = dict(zip(args[::2], args[1::2], strict=True))
    assert opts["--bottleneck"] == "1000"
    assert opts["--rate-bps"] == "100000000"
    assert opts["--burst-bytes"] == "31250"
    assert opts["--limit-bytes"] == "2500000"
    assert json.loads(opts["--aqm-json"]) == resolved("codel")
    assert (opts["--seed"], opts["--series-interval-ns"]) == ("7", "2000000")


# --- the probes: ECN negotiated, and the child qdisc's xstats in an RTM_NEWQDISC message -------


def test_tcp_info_options_say_whether_ecn_was_negotiated() -> None:
    from cclab.engines.kernel import probes

    info = bytearray(248)
    info[5] = 0x1 | 0x2 | 0x4 | probes.TCPI_OPT_ECN  # TIMESTAMPS, SACK, WSCALE, ECN
    assert probes.parse_tcp_info(bytes(info))["options"] & probes.TCPI_OPT_ECN
    info[5] = 0x7
    assert not probes.parse_tcp_info(bytes(info))["options"] & probes.TCPI_OPT_ECN


def _nla(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((-length) % 4)


def _qdisc_message(ifindex: int, kind: str, drops: int, app: bytes | None) -> bytes:
    """An RTM_NEWQDISC payload: struct tcmsg, TCA_KIND, TCA_STATS2 {BASIC, QUEUE, APP}."""
    from cclab.engines.kernel import probes

    tcmsg = struct.pack("=BxxxiIII", 0, ifindex, 0x100000, 0x10001, 1)
    stats = _nla(probes.TCA_STATS_BASIC, struct.pack("=QI", 1000, 10) + b"\0" * 4)
    stats += _nla(probes.TCA_STATS_QUEUE, struct.pack("=IIIII", 0, 0, drops, 0, 0))
    if app is not None:
        stats += _nla(probes.TCA_STATS_APP, app)
    return tcmsg + _nla(probes.TCA_KIND, kind.encode() + b"\0") + _nla(probes.TCA_STATS2, stats)


def test_a_qdisc_message_yields_its_counters_and_raw_xstats() -> None:
    from cclab.engines.kernel import probes

    fq = struct.pack("=IIIIIIIIII", 0, 1514, 12, 2211, 37, 0, 1, 5, 0, 0)
    s = probes.parse_qdisc_stats(_qdisc_message(3, "fq_codel", 412, fq), 3, "fq_codel")
    assert s.drops == 412
    assert probes.ce_marks_from_xstats("fq_codel", s.app) == 2216
    assert probes.parse_qdisc_stats(_qdisc_message(3, "fq_codel", 412, fq), 3, "tbf") is None
    assert probes.parse_qdisc_stats(_qdisc_message(3, "tbf", 0, None), 3, "tbf").app is None


def test_the_userspace_bottleneck_refuses_rates_beyond_its_measured_envelope() -> None:
    assert aqm.userspace_rate_problem(200_000_000) is None
    problem = aqm.userspace_rate_problem(1_000_000_000)
    assert problem is not None and "1000 Mbit/s" in problem and "\n" not in problem
