"""Probes that run while traffic flows: TCP_INFO per flow (sock_diag), tbf and netem backlog
and drops (rtnetlink qdisc stats), machine CPU idle and steal (/proc/stat), and how long the
run's own tasks waited for a CPU (/proc/PID/schedstat).

Each probe owns a raw netlink socket opened inside the namespace it watches; requests are
prebuilt bytes and replies are parsed with `struct`, so a 1 ms queue poll stays cheap.
Layouts: include/uapi/linux/inet_diag.h, tcp.h (struct tcp_info, tcp_bbr_info),
rtnetlink.h (struct tcmsg), gen_stats.h (gnet_stats_basic, gnet_stats_queue).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from dataclasses import dataclass

from cclab.engines.kernel.netns import inside

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
RTM_GETQDISC = 38
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_DONE = 3
NLMSG_ERROR = 2
# enum inet_diag attributes; requests set bit (attr - 1) in idiag_ext.
INET_DIAG_INFO = 2
INET_DIAG_VEGASINFO = 3  # asking for it makes BBR answer with INET_DIAG_BBRINFO
INET_DIAG_CONG = 4
INET_DIAG_BBRINFO = 16
# TCA_* attributes of a qdisc message and of TCA_STATS2.
TCA_KIND = 1
TCA_STATS2 = 7
TCA_STATS_BASIC = 1
TCA_STATS_QUEUE = 3
TCA_STATS_APP = 4  # the qdisc's own xstats struct (gnet_stats_copy_app)
ALL_TCP_STATES = 0xFFF  # a socket in any state: the sender may be closing when sampled
BBR_UNIT = 256  # gains in tcp_bbr_info are shifted left 8 bits
# enum tcp_ca_state (include/net/tcp.h)
#: bpf_cc.CA_PREFIX: BBR at other gains, a BPF struct_ops CC without get_info.
BPF_BBR_PREFIX = "cclab_bbr"
TCPI_OPT_ECN = 8
# tcp_get_info's tcpi_pacing_rate for sk_pacing_rate == ~0UL: no rate set yet.
NO_PACING_RATE = 2**64 - 1
CA_STATE_NAMES = {0: "open", 1: "disorder", 2: "cwr", 3: "recovery", 4: "loss"}
#: google/bbr v2alpha/v3 extend tcp_bbr_info (include/uapi/linux/inet_diag.h): bbr_phase at
#: byte 37 and bbr_version at byte 39 (v1's struct is 20 bytes). enum tcp_bbr_phase -> cc_mode.
BBR_PHASE_OFFSET, BBR_VERSION_OFFSET = 37, 39
BBR_PHASE_NAMES = {1: "startup", 2: "drain", 3: "probe_rtt", 4: "probe_bw_up", 5: "probe_bw_down",
                   6: "probe_bw_cruise", 7: "probe_bw_refill"}  # fmt: skip


def _nl_socket(protocol: int, ns: str) -> socket.socket:
    with inside(ns):
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol)
    sock.bind((0, 0))
    return sock


def _nl_dump(sock: socket.socket, request: bytes) -> list[tuple[int, bytes]]:
    sock.send(request)
    messages = []
    while True:
        data = sock.recv(1 << 20)
        off = 0
        while off + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, off)
            if kind in (NLMSG_DONE, NLMSG_ERROR):
                return messages
            messages.append((kind, data[off + 16 : off + length]))
            off += (length + 3) & ~3


def _attrs(buf: bytes, off: int) -> dict[int, bytes]:
    out = {}
    while off + 4 <= len(buf):
        length, kind = struct.unpack_from("=HH", buf, off)
        if length < 4:
            break
        out[kind & 0x3FFF] = buf[off + 4 : off + length]
        off += (length + 3) & ~3
    return out


@dataclass
class TcpSample:
    cc: str
    ca_state: int
    cwnd_pkts: int
    ssthresh_pkts: int
    srtt_us: int
    min_rtt_us: int
    unacked_pkts: int
    lost_pkts: int
    retrans_pkts_now: int
    total_retrans: int
    pacing_rate_Bps: int
    delivery_rate_Bps: int
    bytes_acked: int
    bytes_sent: int
    bytes_retrans: int
    data_segs_out: int
    total_rto: int | None
    bbr_bw_Bps: int | None = None
    bbr_min_rtt_us: int | None = None
    bbr_pacing_gain: int | None = None
    bbr_cwnd_gain: int | None = None
    #: tcp_bbr_info.bbr_phase of google/bbr v2alpha/v3 (None for v1).
    bbr_phase: int | None = None
    #: tcpi_sacked: SACKed segments still below snd_una's holes (not in the network).
    sacked_pkts: int = 0
    #: tcpi_options (TCPI_OPT_* bits, include/uapi/linux/tcp.h).
    options: int = 0
    #: tcpi_rwnd_limited: time new data waited for the receiver's window so far.
    rwnd_limited_us: int = 0
    #: tcpi_sndbuf_limited: time the sender was starved by its send buffer so far.
    sndbuf_limited_us: int = 0

    @property
    def ecn_ok(self) -> bool:
        # TCPI_OPT_ECN: the handshake negotiated ECN (tp->ecn_flags & TCP_ECN_OK).
        return bool(self.options & TCPI_OPT_ECN)

    @property
    def pacing_rate_mbps(self) -> float | None:
        """sk_pacing_rate; None while it is still sock_init_data's ~0 (no ACK has set it yet),
        which tcp_get_info reports as ~0ULL."""
        if self.pacing_rate_Bps >= NO_PACING_RATE:
            return None
        return self.pacing_rate_Bps * 8 / 1e6

    @property
    def inflight_pkts(self) -> int:
        # tcp_packets_in_flight(): packets_out - (sacked_out + lost_out) + retrans_out
        return self.unacked_pkts - self.sacked_pkts - self.lost_pkts + self.retrans_pkts_now

    def mode(self) -> str | None:
        if self.bbr_phase is not None:
            return BBR_PHASE_NAMES.get(self.bbr_phase)
        if self.bbr_pacing_gain is not None:
            # bbr_update_gains(): STARTUP and DRAIN keep cwnd_gain = high_gain; PROBE_RTT
            # runs at unity gains; PROBE_BW cycles pacing gain with cwnd_gain 2.
            if self.bbr_pacing_gain > 2 * BBR_UNIT:
                return "startup"
            if self.bbr_cwnd_gain > 2 * BBR_UNIT:
                return "drain"
            if self.bbr_cwnd_gain == BBR_UNIT:
                return "probe_rtt"
            return "probe_bw"
        if self.cc.startswith(BPF_BBR_PREFIX):
            return None  # a BPF CC cannot answer INET_DIAG_BBRINFO (no get_info): mode unknown
        if self.ca_state in (3, 4):
            return CA_STATE_NAMES[self.ca_state]
        return "slow_start" if self.cwnd_pkts < self.ssthresh_pkts else "congestion_avoidance"


def parse_bbr_info(bbr: bytes) -> dict[str, int]:
    """INET_DIAG_BBRINFO as TcpSample fields: v1's five, and google/bbr v2alpha/v3's phase."""
    lo, hi, min_rtt, pacing_gain, cwnd_gain = struct.unpack_from("=IIIII", bbr, 0)
    fields = {"bbr_bw_Bps": (hi << 32) | lo, "bbr_min_rtt_us": min_rtt,
              "bbr_pacing_gain": pacing_gain, "bbr_cwnd_gain": cwnd_gain}  # fmt: skip
    if len(bbr) > BBR_VERSION_OFFSET and bbr[BBR_VERSION_OFFSET] in (2, 3):
        fields["bbr_phase"] = bbr[BBR_PHASE_OFFSET]
    return fields


def parse_tcp_info(info: bytes) -> dict[str, int]:
    """The fields of struct tcp_info this engine uses, by byte offset."""
    u8 = lambda o: info[o]  # noqa: E731
    u32 = lambda o: struct.unpack_from("=I", info, o)[0]  # noqa: E731
    u64 = lambda o: struct.unpack_from("=Q", info, o)[0]  # noqa: E731
    return {
        "ca_state": u8(1), "options": u8(5), "unacked": u32(24), "sacked": u32(28), "lost": u32(32), "retrans": u32(36),
        "rtt_us": u32(68), "ssthresh": u32(76), "cwnd": u32(80), "total_retrans": u32(100),
        "pacing_rate": u64(104), "bytes_acked": u64(120), "min_rtt_us": u32(148),
        "data_segs_out": u32(156), "delivery_rate": u64(160),
        # tcpi_rwnd_limited (us, the TCP_CHRONO_RWND_LIMITED chrono; Linux 4.10+)
        "rwnd_limited_us": u64(176) if len(info) >= 184 else 0,
        # tcpi_sndbuf_limited (us, TCP_CHRONO_SNDBUF_LIMITED)
        "sndbuf_limited_us": u64(184) if len(info) >= 192 else 0,
        "bytes_sent": u64(200) if len(info) >= 208 else 0,
        "bytes_retrans": u64(208) if len(info) >= 216 else 0,
        # tcpi_total_rto (Linux 6.7+)
        "total_rto": struct.unpack_from("=H", info, 240)[0] if len(info) >= 242 else -1,
    }  # fmt: skip


class TcpInfoProbe:
    """TCP_INFO of the one socket in a sender namespace whose local port is `sport`."""

    def __init__(self, ns: str, sport: int) -> None:
        self.sport = sport
        self.sock = _nl_socket(NETLINK_SOCK_DIAG, ns)
        ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_VEGASINFO - 1)) | (1 << (INET_DIAG_CONG - 1))
        states = ALL_TCP_STATES
        sockid = struct.pack("!HH16s16sI8s", sport, 0, b"", b"", 0, b"\xff" * 8)
        body = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, ext, 0, states) + sockid
        self.request = struct.pack("=IHHII", 16 + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body

    def sample(self) -> TcpSample | None:
        for _, msg in _nl_dump(self.sock, self.request):
            sport = struct.unpack_from("!H", msg, 4)[0]
            if sport != self.sport:
                continue
            attrs = _attrs(msg, 72)
            if INET_DIAG_INFO not in attrs:
                continue
            t = parse_tcp_info(attrs[INET_DIAG_INFO])
            s = TcpSample(
                cc=attrs.get(INET_DIAG_CONG, b"").rstrip(b"\0").decode(),
                ca_state=t["ca_state"], cwnd_pkts=t["cwnd"], ssthresh_pkts=t["ssthresh"],
                srtt_us=t["rtt_us"], min_rtt_us=t["min_rtt_us"], unacked_pkts=t["unacked"],
                lost_pkts=t["lost"], retrans_pkts_now=t["retrans"], total_retrans=t["total_retrans"],
                sacked_pkts=t["sacked"], options=t["options"], rwnd_limited_us=t["rwnd_limited_us"],
                sndbuf_limited_us=t["sndbuf_limited_us"],
                pacing_rate_Bps=t["pacing_rate"], delivery_rate_Bps=t["delivery_rate"],
                bytes_acked=t["bytes_acked"], bytes_sent=t["bytes_sent"], bytes_retrans=t["bytes_retrans"],
                data_segs_out=t["data_segs_out"], total_rto=None if t["total_rto"] < 0 else t["total_rto"],
            )  # fmt: skip
            bbr = attrs.get(INET_DIAG_BBRINFO)
            if bbr is not None and len(bbr) >= 20:
                for name, value in parse_bbr_info(bbr).items():
                    setattr(s, name, value)
            return s
        return None

    def close(self) -> None:
        self.sock.close()


@dataclass
class QdiscStats:
    bytes: int
    packets: int
    backlog_bytes: int
    qlen: int
    drops: int
    #: The qdisc's raw xstats (TCA_STATS_APP), if it has any.
    app: bytes | None = None
    #: CE marks so far of the AQM under the tbf (kernel path), when its xstats tell.
    ce_marks: int | None = None


def qdisc_stats_request(ifindex: int) -> bytes:
    """RTM_GETQDISC dump request (struct tcmsg with tcm_ifindex set)."""
    body = struct.pack("=BxxxiIII", socket.AF_UNSPEC, ifindex, 0, 0, 0)
    return struct.pack("=IHHII", 16 + len(body), RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body


def parse_qdisc_stats(msg: bytes, ifindex: int, kind: str) -> QdiscStats | None:
    """Counters from one RTM_NEWQDISC payload (tcmsg + attributes) if it is a `kind` qdisc
    on `ifindex`, else None."""
    if struct.unpack_from("=i", msg, 4)[0] != ifindex:
        return None
    attrs = _attrs(msg, 20)
    if attrs.get(TCA_KIND, b"").rstrip(b"\0") != kind.encode() or TCA_STATS2 not in attrs:
        return None
    stats = _attrs(attrs[TCA_STATS2], 0)
    nbytes, npackets = struct.unpack_from("=QI", stats[TCA_STATS_BASIC], 0)
    qlen, backlog, drops, _requeues, _over = struct.unpack_from("=IIIII", stats[TCA_STATS_QUEUE], 0)
    return QdiscStats(nbytes, npackets, backlog, qlen, drops, stats.get(TCA_STATS_APP))


class QdiscProbe:
    """Counters of the `kind` qdisc (tbf, netem) on `ifindex` in namespace `ns`."""

    def __init__(self, ns: str, ifindex: int, kind: str) -> None:
        self.ifindex = ifindex
        self.kind = kind
        self.sock = _nl_socket(socket.NETLINK_ROUTE, ns)
        self.request = qdisc_stats_request(ifindex)

    def sample(self) -> QdiscStats | None:
        found = None
        for _, msg in _nl_dump(self.sock, self.request):
            stats = parse_qdisc_stats(msg, self.ifindex, self.kind)
            if stats is not None:
                found = stats
        return found

    def close(self) -> None:
        self.sock.close()


class TbfProbe(QdiscProbe):
    """Counters of the bottleneck tbf on `ifindex` in namespace `ns`; with `child_kind` (the
    kernel AQM under it), that qdisc's CE marks from the same dump."""

    def __init__(self, ns: str, ifindex: int, child_kind: str | None = None) -> None:
        super().__init__(ns, ifindex, "tbf")
        self.child_kind = child_kind

    def sample(self) -> QdiscStats | None:
        if self.child_kind is None:
            return super().sample()

        found, child = None, None
        for _, msg in _nl_dump(self.sock, self.request):
            found = parse_qdisc_stats(msg, self.ifindex, self.kind) or found
            child = parse_qdisc_stats(msg, self.ifindex, self.child_kind) or child
        if found is not None and child is not None:
            found.ce_marks = ce_marks_from_xstats(self.child_kind, child.app)
        return found


def cpu_times() -> tuple[int, int, int]:
    """(idle + iowait, steal, total) jiffies of the whole machine from /proc/stat. Steal is
    time the hypervisor ran someone else while a vCPU had work: a late delay line on a
    virtual machine is often that, not load inside it."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return idle, fields[7], sum(fields[:8])


def softnet_dropped() -> int:
    """Sum over CPUs of /proc/net/softnet_stat's second column (backlog overflow drops)."""
    return sum(softnet_dropped_per_cpu())


def softnet_dropped_per_cpu() -> list[int]:
    """/proc/net/softnet_stat's second column (backlog overflow drops), one row per CPU."""
    with open("/proc/net/softnet_stat") as f:
        return [int(line.split()[1], 16) for line in f]


def cpu_steal_per_cpu() -> list[tuple[int, int]]:
    """(steal, total) jiffies of each CPU from /proc/stat's cpuN lines."""
    rows = []
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3:4].isdigit():
                fields = [int(x) for x in line.split()[1:9]]
                rows.append((fields[7], sum(fields)))
    return rows


def tcp_retrans_segs(ns: str) -> int | None:
    """The `Tcp: RetransSegs` counter of namespace `ns` (/proc/net/snmp, per namespace): every
    TCP segment retransmitted there, the same count as tcpi_total_retrans summed over its
    sockets. A flow's sender namespace holds only its data and iperf3 control connections."""
    with inside(ns), open("/proc/thread-self/net/snmp") as f:
        lines = [line.split() for line in f if line.startswith("Tcp:")]
    if len(lines) < 2 or "RetransSegs" not in lines[0]:
        return None
    return int(lines[1][lines[0].index("RetransSegs")])


#: CE marks in each qdisc's raw xstats (TCA_STATS_APP), include/uapi/linux/pkt_sched.h:
#: struct tc_codel_xstats (ecn_mark at byte 24, ce_mark at 32), tc_fq_codel_xstats (a u32
#: type, then tc_fq_codel_qd_stats: ecn_mark at 12, ce_mark at 28), tc_pie_xstats (ecn_mark
#: at 36), tc_red_xstats (marked at 12). cake's are nested attributes: not read per sample.
_XSTATS_CE_OFFSETS = {"codel": (24, 32), "fq_codel": (12, 28), "pie": (36,), "red": (12,)}


def ce_marks_from_xstats(kind: str, raw: bytes | None) -> int | None:
    offsets = _XSTATS_CE_OFFSETS.get(kind)
    if raw is None or offsets is None or len(raw) < max(offsets) + 4:
        return None
    return sum(struct.unpack_from("=I", raw, o)[0] for o in offsets)


def schedstat_ns(pid: int) -> tuple[int, int] | None:
    """Nanoseconds task `pid` has spent on a CPU and runnable but waiting for one (the first two
    fields of /proc/PID/schedstat, the scheduler's sched_info accounting); None once it is gone."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            on_cpu, waiting = f.read().split()[:2]
        return int(on_cpu), int(waiting)
    except (OSError, ValueError):
        return None


def run_delay_ns(pid: int) -> int | None:
    """Nanoseconds task `pid` has spent runnable but waiting for a CPU; None once it is gone."""
    stat = schedstat_ns(pid)
    return None if stat is None else stat[1]


def ksoftirqd_pids() -> dict[int, str]:
    """The kernel's ksoftirqd threads, which carry the packet work softirqs defer."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            if name.startswith("ksoftirqd/"):
                found[int(entry.name)] = name
    return found


class CpuWait:
    """How long each of the run's own tasks (iperf3 senders and receivers, the delay line, the
    finite-flow receiver, ksoftirqd) waited for a CPU while runnable: what other load on the
    machine costs the run. Unlike the machine's idle time this does not count work that never
    delays the run (a SCHED_IDLE job gives way at once; the delay line runs SCHED_FIFO). And how
    long each ran: a task that used a whole CPU may have been what limited the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[int, str] = {}
        self._first: dict[int, tuple[int, int]] = {}
        self._last: dict[int, tuple[int, int]] = {}

    def watch(self, pid: int, name: str) -> None:
        stat = schedstat_ns(pid)
        if stat is not None:
            with self._lock:
                self._names[pid], self._first[pid], self._last[pid] = name, stat, stat

    def watch_all(self, tasks: dict[int, str]) -> None:
        for pid, name in tasks.items():
            self.watch(pid, name)

    def sample(self) -> None:
        with self._lock:
            pids = list(self._names)
        for pid in pids:
            stat = schedstat_ns(pid)
            if stat is not None:
                with self._lock:
                    self._last[pid] = stat

    def _seconds(self, field: int) -> dict[str, float]:
        out: dict[str, float] = {}
        with self._lock:
            for pid, name in self._names.items():
                out[name] = max(out.get(name, 0.0), (self._last[pid][field] - self._first[pid][field]) / 1e9)
        return out

    def waited_s(self) -> dict[str, float]:
        """Seconds each watched task waited, by name (a name shared by tasks: their largest)."""
        return self._seconds(1)

    def ran_s(self) -> dict[str, float]:
        """Seconds each watched task ran on a CPU, by name (a name shared by tasks: their largest)."""
        return self._seconds(0)
