//! Reno (RFC 5681) as Linux `net/ipv4/tcp_cong.c` implements it, plus the
//! slow-start and additive-increase helpers other CCs share (as in Linux).

use crate::{CongestionControl, TcpState};

/// Linux `tcp_reno_ssthresh`: halve cwnd, never below 2 packets.
pub const RENO_MIN_SSTHRESH_PKTS: u32 = 2;

/// Linux `tcp_slow_start`: grow cwnd by one packet per packet acked, stopping
/// at ssthresh. Returns the acked packets left over once ssthresh is reached.
pub fn tcp_slow_start(tcp: &mut TcpState, acked_pkts: u32) -> u32 {
    let cwnd = tcp.snd_cwnd.saturating_add(acked_pkts).min(tcp.snd_ssthresh);
    let leftover = acked_pkts - (cwnd - tcp.snd_cwnd);
    tcp.snd_cwnd = cwnd.min(tcp.snd_cwnd_clamp);
    leftover
}

/// Linux `tcp_cong_avoid_ai`: grow cwnd by one packet per `w` packets acked.
pub fn tcp_cong_avoid_ai(tcp: &mut TcpState, w: u32, acked_pkts: u32) {
    let w = w.max(1);
    // If credits accumulated at a higher w, apply them gently now.
    if tcp.snd_cwnd_cnt >= w {
        tcp.snd_cwnd_cnt = 0;
        tcp.snd_cwnd += 1;
    }
    tcp.snd_cwnd_cnt += acked_pkts;
    if tcp.snd_cwnd_cnt >= w {
        let delta = tcp.snd_cwnd_cnt / w;
        tcp.snd_cwnd_cnt -= delta * w;
        tcp.snd_cwnd += delta;
    }
    tcp.snd_cwnd = tcp.snd_cwnd.min(tcp.snd_cwnd_clamp);
}

#[derive(Clone, Debug, Default)]
pub struct Reno;

impl CongestionControl for Reno {
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        (tcp.snd_cwnd >> 1).max(RENO_MIN_SSTHRESH_PKTS)
    }

    /// Linux `tcp_reno_cong_avoid`.
    fn cong_avoid(&mut self, tcp: &mut TcpState, _ack_seq: u64, acked_pkts: u32) {
        if !tcp.is_cwnd_limited {
            return;
        }
        let mut acked = acked_pkts;
        if tcp.in_slow_start() {
            acked = tcp_slow_start(tcp, acked);
            if acked == 0 {
                return;
            }
        }
        let w = tcp.snd_cwnd;
        tcp_cong_avoid_ai(tcp, w, acked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(cwnd: u32, ssthresh: u32) -> TcpState {
        let mut tcp = TcpState::new(1448);
        tcp.snd_cwnd = cwnd;
        tcp.snd_ssthresh = ssthresh;
        tcp.is_cwnd_limited = true;
        tcp
    }

    #[test]
    fn slow_start_adds_one_packet_per_packet_acked_up_to_ssthresh() {
        let mut tcp = state(10, 14);
        let leftover = tcp_slow_start(&mut tcp, 6);
        assert_eq!(tcp.snd_cwnd, 14);
        assert_eq!(leftover, 2);
    }

    #[test]
    fn congestion_avoidance_adds_one_packet_per_window() {
        let mut tcp = state(20, 10);
        let mut reno = Reno;
        for _ in 0..19 {
            reno.cong_avoid(&mut tcp, 0, 1);
        }
        assert_eq!(tcp.snd_cwnd, 20);
        reno.cong_avoid(&mut tcp, 0, 1);
        assert_eq!(tcp.snd_cwnd, 21);
        assert_eq!(tcp.snd_cwnd_cnt, 0);
    }

    #[test]
    fn cwnd_does_not_grow_when_not_cwnd_limited() {
        let mut tcp = state(10, 100);
        tcp.is_cwnd_limited = false;
        Reno.cong_avoid(&mut tcp, 0, 5);
        assert_eq!(tcp.snd_cwnd, 10);
    }

    #[test]
    fn ssthresh_halves_cwnd_but_not_below_two() {
        let mut reno = Reno;
        assert_eq!(reno.ssthresh(&state(40, 100)), 20);
        assert_eq!(reno.ssthresh(&state(3, 100)), 2);
    }
}
