"""TCP_INFO parsing for the kernel engine's flow series (pure; runs without root)."""

from __future__ import annotations

import struct

from cclab.engines.kernel import probes

TCP_INFO_BYTES = 248


def _tcp_info(*, ca_state: int, unacked: int, sacked: int, lost: int, retrans: int, cwnd: int) -> bytes:
    info = bytearray(TCP_INFO_BYTES)
    info[1] = ca_state
    # struct tcp_info (include/uapi/linux/tcp.h): tcpi_unacked, tcpi_sacked, tcpi_lost, tcpi_retrans
    struct.pack_into("=IIII", info, 24, unacked, sacked, lost, retrans)
    struct.pack_into("=I", info, 80, cwnd)
    return bytes(info)


def test_in_flight_leaves_out_sacked_and_lost_segments_as_tcp_packets_in_flight_does() -> None:
    # A BBR flow in recovery with a large SACKed block (seen in the 20+60 ms RTT case:
    # 521 "in flight" against a cwnd of 284 before sacked segments were subtracted).
    t = probes.parse_tcp_info(_tcp_info(ca_state=3, unacked=586, sacked=297, lost=173, retrans=169, cwnd=319))
    assert (t["unacked"], t["sacked"], t["lost"], t["retrans"], t["cwnd"]) == (586, 297, 173, 169, 319)
    s = probes.TcpSample(
        cc="bbr", ca_state=3, cwnd_pkts=319, ssthresh_pkts=0, srtt_us=0, min_rtt_us=0,
        unacked_pkts=586, lost_pkts=173, retrans_pkts_now=169, total_retrans=0, pacing_rate_Bps=0,
        delivery_rate_Bps=0, bytes_acked=0, bytes_sent=0, bytes_retrans=0, data_segs_out=0, total_rto=None,
        sacked_pkts=297,
    )  # fmt: skip
    # packets_out - (sacked_out + lost_out) + retrans_out
    assert s.inflight_pkts == 586 - (297 + 173) + 169
    assert s.inflight_pkts <= s.cwnd_pkts


def test_rwnd_limited_time_is_read_from_its_tcp_info_field() -> None:
    # tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited: three u64 chronos (us) at 168.
    info = bytearray(_tcp_info(ca_state=0, unacked=0, sacked=0, lost=0, retrans=0, cwnd=10))
    struct.pack_into("=QQQ", info, 168, 2_000_000, 152_000, 7)
    assert probes.parse_tcp_info(bytes(info))["rwnd_limited_us"] == 152_000
    # An older kernel's shorter struct has no such field.
    assert probes.parse_tcp_info(bytes(info[:168]))["rwnd_limited_us"] == 0


def test_the_pacing_rate_is_none_until_an_ack_sets_it() -> None:
    def sample(rate_bytes_per_sec: int) -> probes.TcpSample:
        return probes.TcpSample(
            cc="cubic", ca_state=0, cwnd_pkts=10, ssthresh_pkts=0, srtt_us=0, min_rtt_us=0,
            unacked_pkts=0, lost_pkts=0, retrans_pkts_now=0, total_retrans=0, pacing_rate_Bps=rate_bytes_per_sec,
            delivery_rate_Bps=0, bytes_acked=0, bytes_sent=0, bytes_retrans=0, data_segs_out=0, total_rto=None,
        )  # fmt: skip

    # tcp_get_info reports sock_init_data's ~0UL as ~0ULL; CUBIC gets tcp_update_pacing_rate's.
    assert sample(2**64 - 1).pacing_rate_mbps is None
    assert sample(6_250_000).pacing_rate_mbps == 50.0
