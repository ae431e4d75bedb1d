"""Turns what a run measured into the result dict of docs/ARCHITECTURE.md, plus `validity`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cclab.engines.kernel import netem, topology, window
from cclab.engines.kernel.link_changes import offered_bits
from cclab.engines.kernel.sampler import Sampler
from cclab.engines.kernel.shaping import HEADERS_BYTES
from cclab.engines.kernel.traffic import ClientReport, FlowPlan
from cclab.units import FRAME_BYTES

#: Validity thresholds (docs/KERNEL_TESTBED.md, "Validity").
MAX_LATENESS_FRACTION_OF_RTT = 0.01
MIN_CPU_IDLE_FRACTION = 0.10
#: ...but a busy machine only disturbs a run whose own tasks then wait for a CPU: a sender,
#: ksoftirqd or the delay line runnable but waiting this share of the run's wall time. Measured
#: here over 3-4 s runs at 50 Mbit/s: at most 3.4% alone; beside two busy SCHED_IDLE processes
#: (machine idle 1-2%) at most 2.2%, with the delay line on time; beside two busy nice-0 ones
#: up to 27% (ksoftirqd); four flows at 1.5 Gbit/s load the machine themselves to 12-13%.
#: The iperf3 receivers are left out: they waited 0.1-0.6 s per run alone as beside either load,
#: so their wait does not tell other load apart.
MAX_CPU_WAIT_FRACTION = 0.10
#: Retransmissions may exceed drops a little (TLP probes, spurious RTO retransmissions).
RETRANS_MATCH_SLACK_SEGMENTS = 20
RETRANS_MATCH_SLACK_FRACTION = 0.10
#: Linux's TCP_RTO_MIN (include/net/tcp.h): a tail drop is retransmitted by the RTO at worst.
TCP_RTO_MIN_S = 0.200


@dataclass
class Measured:
    plans: list[FlowPlan]
    clients: dict[int, ClientReport]
    router_counters: dict
    receiver_counters: dict
    sampler: Sampler
    tbf_first: object
    tbf_last: object
    delay_report: dict | None
    delay_line_died: bool
    softnet_growth: int
    rate_bps: int
    rtt_ns: int
    duration_s: float
    wall_s: float
    queue_limit_bytes: int | None
    queue_limit_packets: int | None
    #: A full frame on the path's devices (`[host] mtu` + 14).
    frame_bytes: int = FRAME_BYTES
    #: netem.NETEM or netem.DELAY_LINE; with netem, its qdiscs and their final counters.
    delay_mechanism: str = netem.DELAY_LINE
    netem_qdiscs: list = field(default_factory=list)
    netem_stats: dict = field(default_factory=dict)
    #: Finite flows (finite.py), times in seconds since the run's t0: the SYN of each data
    #: connection, the receiver's record per flow, and the flows stopped at the run's end.
    syn_s: dict[int, float] = field(default_factory=dict)
    received: dict[int, dict] = field(default_factory=dict)
    cut_at_end: set[int] = field(default_factory=set)
    #: Finite flows: retransmitted segments counted in each sender namespace (probes.py).
    sender_retrans: dict[int, int | None] = field(default_factory=dict)
    receiver_cpu_s: float | None = None
    #: The bottleneck's AQM (aqm.py): its kind, whether cclab's userspace bottleneck ran it
    #: (its report is delay_report["bottleneck"]), else the kernel qdisc's final counters.
    aqm_kind: str = "fifo"
    aqm_userspace: bool = False
    aqm_counters: object = None
    #: CLOCK_REALTIME of the run's t0 (the userspace bottleneck's series clock).
    t0_realtime: float = 0.0
    ecn_of_flow: list[bool] = field(default_factory=list)
    #: Per CPU over the run: backlog overflow drops (softnet_stat) and the share of its time
    #: the hypervisor took (steal), to tell a held-up CPU from an overfull path.
    softnet_growth_per_cpu: list[int] = field(default_factory=list)
    steal_fraction_per_cpu: list[float] = field(default_factory=list)
    #: The resolved bottleneck: with a schedule or a trace, utilization counts what it offered.
    link: dict = field(default_factory=dict)
    #: Metrics cover [warmup_s, end]: the router's and the receiver's per-flow counters
    #: as read at the warm-up (None without one, or if the run never got there).
    warmup_s: float = 0.0
    router_at_warmup: dict | None = None
    receiver_at_warmup: dict | None = None

    @property
    def userspace_report(self) -> dict | None:
        return (self.delay_report or {}).get("bottleneck") if self.aqm_userspace else None


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def flow_result(m: Measured, p: FlowPlan) -> dict:
    c = m.clients[p.flow_id]
    rows = m.sampler.flows[p.flow_id]
    last = rows.samples[-1] if rows.samples else None
    sent_pkts, sent_bytes = m.router_counters.get(("sent", p.index), (0, 0))
    loss_pkts = m.router_counters.get(("loss", p.index), (0, 0))[0]
    recv_pkts = m.receiver_counters.get(("recv", p.index), (0, 0))[0]
    queue_drops = max(0, sent_pkts - loss_pkts - recv_pkts)
    srtts_ms = [s.srtt_us / 1000 for s in rows.samples if s.srtt_us > 0]
    if p.size_bytes is not None:
        delivered, start_s, end_s, fct_s = finite_times(m, p)
        completed = fct_s is not None
    else:
        delivered, start_s, end_s = c.bytes_received, p.start_s, p.start_s + c.seconds_received
        completed, fct_s = False, None
    active_s = end_s - start_s
    retrans = c.retransmits
    if m.sender_retrans.get(p.flow_id) is not None:
        retrans = m.sender_retrans[p.flow_id]
    elif not c.ok:  # a client stopped at the run's end wrote no JSON
        retrans = last.total_retrans if last is not None else 0
    return {
        "flow_id": p.flow_id,
        "cc": p.cc,
        "start_s": start_s,
        "end_s": end_s,
        "goodput_mbps": delivered * 8 / active_s / 1e6 if active_s > 0 else 0.0,
        "bytes_delivered": delivered,
        "bytes_sent": max(0, sent_bytes - HEADERS_BYTES * sent_pkts),
        "data_segments_sent": sent_pkts,
        "retrans_segments": retrans,
        "lost_segments": queue_drops + loss_pkts,
        "queue_drop_segments": queue_drops,
        "random_loss_segments": loss_pkts,
        "rto_count": last.total_rto if last is not None else None,
        "rtt_min_ms": last.min_rtt_us / 1000 if last is not None else None,
        "rtt_mean_ms": float(np.mean(srtts_ms)) if srtts_ms else None,
        "rtt_p50_ms": _pct(srtts_ms, 50) if srtts_ms else None,
        "rtt_p95_ms": _pct(srtts_ms, 95) if srtts_ms else None,
        "rtt_max_ms": max(srtts_ms) if srtts_ms else None,
        "fct_s": fct_s,
        "completed": completed,
        "ecn": bool(last.ecn_ok) if last is not None else False,
        "ce_marks_received": m.receiver_counters.get(("ce", p.index), (0, 0))[0],
        "aqm_drop_segments": aqm_drop_segments(m, p),
        "rwnd_limited_ms": last.rwnd_limited_us / 1000 if last is not None else None,
        "sndbuf_limited_ms": last.sndbuf_limited_us / 1000 if last is not None else None,
    }


def windowed(m: Measured, flows: list[dict], bn: dict, qs: dict) -> tuple[list[dict], dict]:
    """The whole-run results moved to `whole_run_*`, the metrics over [warmup_s, end] in
    their place (window.py); without a warm-up both are the same values."""
    if m.warmup_s <= 0:
        return [window.with_whole_run(f, window.FLOW_METRICS) for f in flows], window.with_whole_run(bn, window.BOTTLENECK_METRICS)
    by_id = {p.flow_id: p for p in m.plans}
    out = []
    for f in flows:
        p = by_id[f["flow_id"]]
        rows = m.sampler.flows[p.flow_id]
        out.append(window.flow_window(
            f, warmup_s=m.warmup_s, at_warmup=counters_at_warmup(m, p),
            srtt_ms_after=[s.srtt_us / 1000 for t, s in zip(rows.time_s, rows.samples) if t > m.warmup_s and s.srtt_us > 0],
        ))  # fmt: skip
    return out, window.bottleneck_window(
        bn, qs, out, warmup_s=m.warmup_s, duration_s=m.duration_s, rate_bps=m.rate_bps, sent_bytes=sent_bytes_since_warmup(m)
    )


def sent_bytes_since_warmup(m: Measured) -> int:
    """Bytes the bottleneck sent after the warm-up: its cumulative counter at the end minus
    its last sample by the warm-up (the userspace bottleneck's series, else tbf's)."""
    report = m.userspace_report
    if report is not None:
        series = report["series"]
        before = [b for t_ns, b in zip(series["time_realtime_ns"], series["bytes_sent"]) if t_ns / 1e9 - m.t0_realtime <= m.warmup_s]
        return report["bytes_sent"] - (before[-1] if before else 0)
    q = m.sampler.queue
    base = m.tbf_first
    for t, s in zip(q.time_s, q.stats):
        if t > m.warmup_s:
            break
        base = s
    return m.tbf_last.bytes - base.bytes


def counters_at_warmup(m: Measured, p: FlowPlan) -> dict[str, float | None]:
    """Flow `p`'s cumulative counters at the warm-up: from its TCP_INFO samples around it and
    the per-flow packet counters the engine read then. The bytes (and the receive-window
    time) are interpolated between the samples on either side: the window's goodput divides
    by the time from warmup_s, and the last sample before it is up to a sample interval older
    (100 ms: 3% of a 3 s window's bytes, counted in excess). Counts of events keep that sample."""
    rows = m.sampler.flows[p.flow_id]
    before = after = None
    for t, s in zip(rows.time_s, rows.samples):
        if t > m.warmup_s:
            after = (t, s)
            break
        before = (t, s)
    counters: dict[str, float | None] = {}
    if before is not None:
        t0, sample = before

        def at_warmup(value_of) -> float:  # noqa: ANN001
            if after is None or after[0] <= t0:
                return value_of(sample)
            t1, later = after
            return value_of(sample) + (value_of(later) - value_of(sample)) * (m.warmup_s - t0) / (t1 - t0)

        counters.update(
            bytes_delivered=round(at_warmup(lambda s: s.bytes_acked)), bytes_sent=round(at_warmup(lambda s: s.bytes_sent)),
            data_segments_sent=sample.data_segs_out, retrans_segments=sample.total_retrans, rto_count=sample.total_rto,
            rwnd_limited_ms=at_warmup(lambda s: s.rwnd_limited_us) / 1000,
            sndbuf_limited_ms=at_warmup(lambda s: s.sndbuf_limited_us) / 1000,
        )  # fmt: skip
    if m.router_at_warmup is not None and m.receiver_at_warmup is not None:
        sent_pkts = m.router_at_warmup.get(("sent", p.index), (0, 0))[0]
        loss_pkts = m.router_at_warmup.get(("loss", p.index), (0, 0))[0]
        counters.update(data_segments_sent=sent_pkts, random_loss_segments=loss_pkts,
            ce_marks_received=m.receiver_at_warmup.get(("ce", p.index), (0, 0))[0],
        )  # fmt: skip
    return counters


def aqm_drop_segments(m: Measured, p: FlowPlan) -> int | None:
    """This flow's data packets the AQM dropped: the userspace bottleneck counts per flow;
    tbf alone never drops for the AQM; a kernel AQM's drops are not split by flow (None)."""
    report = m.userspace_report
    if report is not None:
        saddr = topology.sender_ip(p.index)
        return sum(f["aqm_drops"] for f in report["flows"] if f["saddr"] == saddr and f["sport"] == p.ports.client)
    return 0 if m.aqm_kind == "fifo" else None


def finite_times(m: Measured, p: FlowPlan) -> tuple[int, float, float, float | None]:
    """(bytes delivered, start, end, FCT or None) of a finite flow, from the receiver's
    record and the SYN time (finite.py). It completed if all `size_bytes` reached the
    receiving socket within the run; the active interval then ends at the last byte, else
    at the end of the run (or the last byte that arrived, if the flow died earlier)."""
    r = m.received.get(p.flow_id, {})
    delivered = min(int(r.get("bytes_received", 0)), p.size_bytes)
    # Without a SYN time (the client never connected) the flow's launch is the best there is.
    start_s = m.syn_s.get(p.flow_id, p.start_s)
    last = r.get("last_byte_s")
    if delivered >= p.size_bytes and last is not None and last <= m.duration_s:
        return delivered, start_s, last, last - start_s
    alive_to = m.duration_s if p.flow_id in m.cut_at_end else r.get("latest_s") or m.duration_s
    return delivered, start_s, max(start_s, min(alive_to, m.duration_s)), None


def flow_series(m: Measured) -> dict:
    cols = {k: [] for k in ("time_s", "flow_id", "throughput_mbps", "cwnd_pkts", "pacing_rate_mbps", "srtt_ms",
                            "inflight_pkts", "bbr_bw_mbps", "bbr_min_rtt_ms", "cc_mode", "retrans_segments")}  # fmt: skip
    for p in m.plans:
        rows = m.sampler.flows[p.flow_id]
        prev_t, prev = p.start_s, None
        for t, s in zip(rows.time_s, rows.samples):
            dt = t - prev_t
            acked = s.bytes_acked - (prev.bytes_acked if prev else 0)
            cols["time_s"].append(round(t, 6))
            cols["flow_id"].append(p.flow_id)
            cols["throughput_mbps"].append(acked * 8 / dt / 1e6 if dt > 0 else 0.0)
            cols["cwnd_pkts"].append(s.cwnd_pkts)
            cols["pacing_rate_mbps"].append(s.pacing_rate_mbps)
            cols["srtt_ms"].append(s.srtt_us / 1000)
            cols["inflight_pkts"].append(s.inflight_pkts)
            cols["bbr_bw_mbps"].append(s.bbr_bw_Bps * 8 / 1e6 if s.bbr_bw_Bps is not None else None)
            cols["bbr_min_rtt_ms"].append(s.bbr_min_rtt_us / 1000 if s.bbr_min_rtt_us is not None else None)
            # Before iperf3 switches the socket to the flow's CC it runs the namespace's
            # default (reno): such a sample says nothing about the flow's CC's mode.
            cols["cc_mode"].append(s.mode() if s.cc == p.kernel_cc else None)
            cols["retrans_segments"].append(s.total_retrans - (prev.total_retrans if prev else 0))
            prev_t, prev = t, s
    return cols


def queue_series(m: Measured) -> dict:
    if m.userspace_report is not None:
        return userspace_queue_series(m, m.userspace_report["series"])
    q = m.sampler.queue
    cols = {"time_s": [], "queue_bytes": [], "drops": [], "ce_marks": [], "utilization": []}
    prev_t, prev = 0.0, m.tbf_first
    for t, s in zip(q.time_s, q.stats):
        cols["time_s"].append(round(t, 6))
        cols["queue_bytes"].append(s.backlog_bytes)
        cols["drops"].append(s.drops - prev.drops)
        if m.aqm_kind == "fifo":
            cols["ce_marks"].append(0)  # tail drop never marks
        elif s.ce_marks is not None and prev.ce_marks is not None:
            cols["ce_marks"].append(s.ce_marks - prev.ce_marks)
        else:
            cols["ce_marks"].append(None)  # this qdisc's xstats are not read per sample (cake)
        cols["utilization"].append(_utilization(m, (s.bytes - prev.bytes) * 8, prev_t, t))
        prev_t, prev = t, s
    return cols


def userspace_queue_series(m: Measured, series: dict) -> dict:
    """The userspace bottleneck's own occupancy samples (its CLOCK_REALTIME stamps as seconds
    since t0; cumulative counters as per-interval differences), from t0 to the run's end."""
    cols = {"time_s": [], "queue_bytes": [], "drops": [], "ce_marks": [], "utilization": []}
    prev = None
    for i, t_ns in enumerate(series["time_realtime_ns"]):
        t = t_ns / 1e9 - m.t0_realtime
        row = {k: series[k][i] for k in ("backlog_bytes", "drops", "ce_marks", "bytes_sent")}
        if t < 0 or t > m.duration_s + 1.0:
            prev = (t, row) if t < 0 else prev
            continue
        prev_t, p = prev if prev is not None else (0.0, {k: 0 for k in row})
        cols["time_s"].append(round(t, 6))
        cols["queue_bytes"].append(row["backlog_bytes"])
        cols["drops"].append(row["drops"] - p["drops"])
        cols["ce_marks"].append(row["ce_marks"] - p["ce_marks"])
        cols["utilization"].append(_utilization(m, (row["bytes_sent"] - p["bytes_sent"]) * 8, prev_t, t))
        prev = (t, row)
    return cols


def aqm_figures(m: Measured, qs: dict) -> dict:
    """The AQM columns of `bottleneck` (CONTRACT.md), from whichever implementation ran."""
    tbf_drops = m.tbf_last.drops - m.tbf_first.drops
    report = m.userspace_report
    if report is not None:
        # The pass-through tbf should drop nothing; if it did, those were overflow drops too.
        overflow, aqm_drops, ce = report["overflow_drops"] + tbf_drops, report["aqm_drops"], report["ce_marks"]
        soj = report["sojourn_ns"]
        sojourn_ms = {q: soj[q] / 1e6 for q in ("mean", "p50", "p95", "p99")} if soj["count"] else None
    else:
        if m.aqm_counters is not None:  # a kernel AQM under tbf: tbf counts its child's drops
            overflow, aqm_drops, ce = m.aqm_counters.overflow_drops, m.aqm_counters.aqm_drops, m.aqm_counters.ce_marks
        else:
            overflow, aqm_drops, ce = tbf_drops, 0, 0
        delays_ms = [b * 8 / m.rate_bps * 1e3 for b in qs["queue_bytes"]]
        sojourn_ms = None
        if delays_ms:
            sojourn_ms = {"mean": float(np.mean(delays_ms)), "p50": _pct(delays_ms, 50),
                          "p95": _pct(delays_ms, 95), "p99": _pct(delays_ms, 99)}  # fmt: skip
    drops = overflow + aqm_drops
    return {
        "aqm": m.aqm_kind,
        "drops": drops,
        "overflow_drops": overflow,
        "aqm_drops": aqm_drops,
        "ce_marks": ce,
        "drops_per_s": drops / m.duration_s,
        "ce_marks_per_s": ce / m.duration_s,
        **{f"sojourn_{q}_ms": sojourn_ms[q] if sojourn_ms else None for q in ("mean", "p50", "p95", "p99")},
    }


def _utilization(m: Measured, sent_bits: float, from_s: float, to_s: float) -> float:
    """Bits sent over what the link offered in [from_s, to_s] (its schedule or trace, if any)."""
    if to_s <= from_s:
        return 0.0
    if m.link.get("schedule") or m.link.get("trace_ms"):
        offered = offered_bits(m.link, from_s, to_s)
        return min(1.0, sent_bits / offered) if offered > 0 else 0.0
    return min(1.0, sent_bits / m.rate_bps / (to_s - from_s))


def bottleneck(m: Measured, flows: list[dict], qs: dict) -> dict:
    backlog = qs["queue_bytes"]
    report = m.userspace_report
    sent_bytes = report["bytes_sent"] if report is not None else m.tbf_last.bytes - m.tbf_first.bytes
    return {
        "utilization": _utilization(m, sent_bytes * 8, 0.0, m.duration_s),
        **aqm_figures(m, qs),
        "random_losses": sum(f["random_loss_segments"] for f in flows),
        "queue_limit_bytes": m.queue_limit_bytes,
        "queue_limit_packets": m.queue_limit_packets,
        "queue_mean_bytes": float(np.mean(backlog)) if backlog else 0.0,
        "queue_p10_bytes": _pct(backlog, 10),
        "queue_p50_bytes": _pct(backlog, 50),
        "queue_p95_bytes": _pct(backlog, 95),
        "queue_max_bytes": max(backlog) if backlog else 0,
        **dual_queue_figures(m.userspace_report),
    }


def dual_queue_figures(report: dict | None) -> dict:
    """DualPI2's L4S and classic queues apart, from the userspace bottleneck's count of each
    (the simulator's DualQueueMetrics under the same names); null elsewhere, and for the
    kernel's sch_dualpi2, whose xstats give no per-queue sojourns."""
    queues = (report or {}).get("dual_queues")
    if not queues:
        return dict.fromkeys(window.DUAL_QUEUE_METRICS)
    out = {}
    for name in ("l4s", "classic"):
        q, soj = queues[name], queues[name]["sojourn_ns"]
        out[f"{name}_packets"], out[f"{name}_ce_marks"] = q["packets"], q["ce_marks"]
        for stat in ("mean", "p50", "p99"):
            out[f"{name}_sojourn_{stat}_ms"] = soj[stat] / 1e6 if soj["count"] else None
    return out


def delay_reasons(m: Measured) -> list[str]:
    """Why the delay emulation may not have been faithful: netem drops with netem; the
    delay line's death, drops and lateness with the delay line (netem has no lateness)."""
    if m.delay_mechanism == netem.NETEM:
        return netem.validity_reasons(m.netem_qdiscs, m.netem_stats)
    reasons = []
    d = m.delay_report
    if m.delay_line_died:
        reasons.append("the delay line exited during the run (ACKs were dropped)")
    if d is None:
        reasons.append("the delay line wrote no report")
        return reasons
    for q in d["queues"]:
        if q["queue_dropped"] or q["user_dropped"]:
            reasons.append(
                f"delay line queue {q['queue']} dropped packets "
                f"(queue_dropped {q['queue_dropped']}, user_dropped {q['user_dropped']})"
            )
    limit_ns = MAX_LATENESS_FRACTION_OF_RTT * m.rtt_ns
    if d["lateness_ns"]["p99"] > limit_ns:
        reasons.append(
            f"delay line p99 lateness {d['lateness_ns']['p99'] / 1e3:.0f} us exceeds 1% of the RTT "
            f"({limit_ns / 1e3:.0f} us){host_steal_note(m)}"
        )
    if d["no_timestamp"] > 0.001 * max(1, d["packets"]):
        reasons.append(f"{d['no_timestamp']} delayed packets had no kernel receive timestamp")
    return reasons


def bottleneck_reasons(m: Measured) -> list[str]:
    """The userspace bottleneck must have dropped nothing outside its queue discipline and
    released on time; the pass-through tbf must not have queued enough to drop."""
    if not m.aqm_userspace:
        return []
    reasons = []
    if m.delay_line_died and m.delay_mechanism == netem.NETEM:  # else delay_reasons says so
        reasons.append("the userspace bottleneck exited during the run (data packets were dropped)")
    report = m.userspace_report
    if report is None:
        return [*reasons, "the userspace bottleneck wrote no report"]
    if report.get("queue_dropped") or report.get("user_dropped"):
        reasons.append(
            f"userspace bottleneck queue dropped packets outside its qdisc "
            f"(queue_dropped {report.get('queue_dropped')}, user_dropped {report.get('user_dropped')})"
        )
    limit_ns = MAX_LATENESS_FRACTION_OF_RTT * m.rtt_ns
    if report["release_lateness_ns"]["p99"] > limit_ns:
        reasons.append(
            f"userspace bottleneck p99 release lateness {report['release_lateness_ns']['p99'] / 1e3:.0f} us "
            f"exceeds 1% of the RTT ({limit_ns / 1e3:.0f} us){host_steal_note(m)}"
        )
    tbf_drops = m.tbf_last.drops - m.tbf_first.drops
    if tbf_drops:
        reasons.append(f"the pass-through tbf behind the userspace bottleneck dropped {tbf_drops} packets")
    return reasons


def detection_horizon_s(flows: list[dict]) -> float:
    """How long before the run's end a bottleneck drop may be that its sender had no time to
    retransmit: two of the longest RTTs the flows saw, queueing included (SACK or RACK see the
    hole an RTT later, the retransmission then waits behind the queue), and TCP_RTO_MIN for
    a tail drop."""
    longest_rtt_ms = max((f.get("rtt_max_ms") or 0.0 for f in flows), default=0.0)
    return 2 * longest_rtt_ms / 1e3 + TCP_RTO_MIN_S


def undetected_drops(qs: dict, horizon_s: float) -> int:
    """The bottleneck's drops in the last `horizon_s` of its queue samples."""
    if not qs.get("time_s"):
        return 0
    end_s = qs["time_s"][-1]
    return int(sum(d for t, d in zip(qs["time_s"], qs["drops"], strict=False) if t > end_s - horizon_s))


def validity(m: Measured, flows: list[dict], bn: dict, qs: dict | None = None) -> dict:
    reasons = delay_reasons(m) + bottleneck_reasons(m)
    if m.softnet_growth > 0:
        reasons.append(f"/proc/net/softnet_stat drops grew by {m.softnet_growth} (packets lost outside tbf){softnet_cpu_note(m)}")
    oversize = sum(v[0] for k, v in m.router_counters.items() if k[0] == "oversize")
    if oversize:
        reasons.append(f"{oversize} packets longer than the MTU left the senders (offloads not off)")
    lost_outside = sum(f["queue_drop_segments"] for f in flows) - bn["drops"]
    if lost_outside > RETRANS_MATCH_SLACK_SEGMENTS:
        reasons.append(f"{lost_outside} data segments vanished between router and receiver besides bottleneck drops")
    retrans = sum(f["retrans_segments"] for f in flows)
    drops = bn["drops"] + bn["random_losses"]
    slack = max(RETRANS_MATCH_SLACK_SEGMENTS, RETRANS_MATCH_SLACK_FRACTION * drops)
    # Drops too close to the end for their senders to have retransmitted them yet.
    late = undetected_drops(qs, detection_horizon_s(flows)) if qs is not None else 0
    if retrans < drops - late - slack or retrans > drops + slack:
        reasons.append(
            f"retransmits ({retrans}) do not match bottleneck drops (overflow {bn['overflow_drops']} + AQM "
            f"{bn['aqm_drops']}) + loss-rule drops ({bn['random_losses']})"
        )
    idle = cpu_idle_fraction(m)
    waited = longest_cpu_wait(m)
    if idle is not None and idle < MIN_CPU_IDLE_FRACTION and waited is not None and waited[1] > MAX_CPU_WAIT_FRACTION:
        reasons.append(
            f"machine CPU idle {idle:.0%} is below {MIN_CPU_IDLE_FRACTION:.0%} and the run's {waited[0]} waited "
            f"{waited[1]:.0%} of the run for a CPU"
        )
    busiest = busiest_task(m)
    if busiest is not None and busiest[1] >= HOST_LIMIT_CPU_FRACTION and never_queued(bn, m.frame_bytes):
        reasons.append(
            f"the host limited the run: its {busiest[0]} ran {busiest[1]:.0%} of the run on a CPU while the bottleneck "
            f"never queued or dropped (utilization {bn['utilization']:.0%})"
        )
    for p, ecn in zip(m.plans, m.ecn_of_flow, strict=False):
        negotiated = next((f["ecn"] for f in flows if f["flow_id"] == p.flow_id), None)
        if negotiated is not None and negotiated != ecn:
            reasons.append(f"flow {p.flow_id}: ecn = {str(ecn).lower()} asked, but TCP negotiated ecn = {str(negotiated).lower()}")
    for p in m.plans:
        c = m.clients[p.flow_id]
        if not c.ok and p.flow_id not in m.cut_at_end:
            reasons.append(f"flow {p.flow_id}: iperf3 failed: {c.error}")
        error = m.received.get(p.flow_id, {}).get("error")
        if error and p.flow_id not in m.cut_at_end:
            reasons.append(f"flow {p.flow_id}: the receiver failed: {error}")
    return {"valid": not reasons, "reasons": reasons}


#: A task of the run on a CPU this share of the run may be what limited it (issue 37: one flow at
#: 1 Gbit/s x 200 ms delivered 820 Mbit/s with the queue empty and nothing lost).
HOST_LIMIT_CPU_FRACTION = 0.95
#: "Never queued": the bottleneck's largest backlog stayed under this many full frames, with no
#: drop, and the link ran below this share of its rate (a flow the link limited would have queued).
NEVER_QUEUED_MAX_FRAMES = 2
NEVER_QUEUED_UTILIZATION = 0.95


def never_queued(bn: dict, frame_bytes: int) -> bool:
    """The bottleneck never held a queue nor dropped, and the link was not full."""
    return (
        (bn.get("queue_max_bytes") or 0) < NEVER_QUEUED_MAX_FRAMES * frame_bytes
        and (bn.get("drops") or 0) == 0
        and (bn.get("utilization") or 0.0) < NEVER_QUEUED_UTILIZATION
    )


def busiest_task(m: Measured) -> tuple[str, float] | None:
    """The run's task that ran longest on a CPU, and its share of the run."""
    ran = m.sampler.cpu_wait.ran_s()
    if not ran or m.wall_s <= 0:
        return None
    name = max(ran, key=ran.__getitem__)
    return name, ran[name] / m.wall_s


def longest_cpu_wait(m: Measured) -> tuple[str, float] | None:
    """The run's task (receivers aside) that waited longest for a CPU, and its share of the run."""
    waited = {name: s for name, s in m.sampler.cpu_wait.waited_s().items() if "receiver" not in name}
    if not waited or m.wall_s <= 0:
        return None
    name = max(waited, key=waited.__getitem__)
    return name, waited[name] / m.wall_s


def cpu_idle_fraction(m: Measured) -> float | None:
    return _cpu_fraction(m, 1)


def cpu_steal_fraction(m: Measured) -> float | None:
    """The share of the machine's CPU time the hypervisor gave to others during the run."""
    return _cpu_fraction(m, 2)


def _cpu_fraction(m: Measured, column: int) -> float | None:
    cpu = m.sampler.cpu
    if len(cpu) < 2:
        return None
    return (cpu[-1][column] - cpu[0][column]) / max(1, cpu[-1][3] - cpu[0][3])


def softnet_cpu_note(m: Measured) -> str:
    """Appended to the softnet reason: on which CPUs, and how much of each the hypervisor took."""
    parts = [
        f"CPU {cpu}: {drops}" + (f", the hypervisor took {m.steal_fraction_per_cpu[cpu]:.1%} of it" if cpu < len(m.steal_fraction_per_cpu) else "")
        for cpu, drops in enumerate(m.softnet_growth_per_cpu)
        if drops > 0
    ]
    return f"; {'; '.join(parts)}" if parts else ""


def host_steal_note(m: Measured) -> str:
    """Appended to a lateness reason: whether the host took CPU time from this machine."""
    steal = cpu_steal_fraction(m)
    if steal is None:
        return ""
    return f"; the hypervisor took {steal:.1%} of the CPU time meanwhile"
