//! DCTCP (RFC 8257) as Linux `net/ipv4/tcp_dctcp.c` runs it: the sender's side.
//!
//! Alpha, the fraction of delivered packets that the receiver echoed as CE,
//! is an EWMA with gain g = 1/16 (`dctcp_shift_g = 4`) updated once per window
//! of data (`dctcp_update_alpha`, the `.in_ack_event` hook, after the ACK's
//! deliveries are counted: the order since 149dfb31, "tcp: reorganize
//! tcp_in_ack_event() and tcp_count_delivered()"). On an ECN echo TCP enters CWR
//! once per window and asks `.ssthresh` for cwnd x (1 - alpha / 2); a loss
//! halves instead (`dctcp_react_to_loss`, through `.set_state` on entering
//! Recovery and `.cwnd_event(CA_EVENT_LOSS)` on a timeout). Growth is Reno's.
//!
//! The receiver's half, the CE state machine that makes ECE echo exactly the
//! last segment's CE bit (tcp_dctcp.h `dctcp_ece_ack_update`), runs where the
//! simulator's receiver is (cclab-sim's tcp/receiver.rs): a DCTCP flow is DCTCP
//! at both ends, as iperf3 sets its `-C` on both sockets.
//!
//! The flag `TCP_CONG_NEEDS_ECN` ([`CongestionControl::needs_ecn`]) makes TCP
//! negotiate ECN whatever `net.ipv4.tcp_ecn` says and send every packet ECT(0),
//! retransmissions included. Without a negotiated ECN it runs as `dctcp_reno`:
//! Reno's ssthresh and growth, no alpha.

use crate::reno::{Reno, RENO_MIN_SSTHRESH_PKTS};
use crate::{CaState, CcTelemetry, CongestionControl, CwndEvent, TcpState};

/// `DCTCP_MAX_ALPHA`: alpha is a 10-bit fixed point, 1024 = 1.
pub const DCTCP_MAX_ALPHA: u32 = 1024;
/// `dctcp_shift_g`: g = 1/2^4 (module parameter, default 4).
pub const DCTCP_SHIFT_G: u32 = 4;

#[derive(Clone, Debug)]
pub struct Dctcp {
    /// `ca->dctcp_alpha`, starting at `dctcp_alpha_on_init` = DCTCP_MAX_ALPHA.
    alpha: u32,
    /// `ca->next_seq`: the window ends when snd_una reaches it.
    next_seq: u64,
    old_delivered: u64,
    old_delivered_ce: u64,
    /// `ca->loss_cwnd`: cwnd before the last reduction (undo).
    loss_cwnd: u32,
    /// `dctcp_reno`: ECN was not negotiated, so this is Reno.
    fallback_to_reno: bool,
}

impl Default for Dctcp {
    fn default() -> Self {
        Dctcp { alpha: DCTCP_MAX_ALPHA, next_seq: 0, old_delivered: 0, old_delivered_ce: 0, loss_cwnd: 0, fallback_to_reno: false }
    }
}

impl Dctcp {
    /// Alpha as a fraction in [0, 1].
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / DCTCP_MAX_ALPHA as f64
    }

    /// `dctcp_reset`: a new observation window from now.
    fn reset(&mut self, tcp: &TcpState) {
        self.next_seq = tcp.snd_nxt;
        self.old_delivered = tcp.delivered;
        self.old_delivered_ce = tcp.delivered_ce;
    }

    /// `dctcp_cwnd_undo` (`tcp_reno_undo_cwnd` as `dctcp_reno`). Not a trait hook yet
    /// (the simulator undoes no reduction), as BBR's.
    pub fn undo_cwnd(&self, tcp: &TcpState) -> u32 {
        if self.fallback_to_reno {
            return tcp.snd_cwnd.max(tcp.prior_cwnd);
        }
        tcp.snd_cwnd.max(self.loss_cwnd)
    }

    /// `dctcp_react_to_loss`: a loss halves, as Reno.
    fn react_to_loss(&mut self, tcp: &mut TcpState) {
        self.loss_cwnd = tcp.snd_cwnd;
        tcp.snd_ssthresh = (tcp.snd_cwnd >> 1).max(RENO_MIN_SSTHRESH_PKTS);
    }
}

impl CongestionControl for Dctcp {
    /// `dctcp_init`, at the end of the handshake.
    fn init(&mut self, tcp: &mut TcpState) {
        if !tcp.ecn_ok {
            self.fallback_to_reno = true;
            return;
        }
        self.alpha = DCTCP_MAX_ALPHA;
        self.loss_cwnd = 0;
        self.reset(tcp);
    }

    /// `dctcp_ssthresh`: cwnd x (1 - alpha / 2), at least 2.
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        if self.fallback_to_reno {
            return Reno.ssthresh(tcp);
        }
        self.loss_cwnd = tcp.snd_cwnd;
        tcp.snd_cwnd.saturating_sub((tcp.snd_cwnd as u64 * self.alpha as u64 >> 11) as u32).max(2)
    }

    /// `tcp_reno_cong_avoid`.
    fn cong_avoid(&mut self, tcp: &mut TcpState, ack_seq: u64, acked_pkts: u32) {
        Reno.cong_avoid(tcp, ack_seq, acked_pkts)
    }

    /// `dctcp_update_alpha`: once snd_una passes the window's end, alpha moves a
    /// sixteenth of the way to the window's marked fraction.
    fn in_ack_event(&mut self, tcp: &mut TcpState) {
        if self.fallback_to_reno || tcp.snd_una < self.next_seq {
            return;
        }
        let delivered_ce = tcp.delivered_ce - self.old_delivered_ce;
        // alpha = (1 - g) alpha + g F; min_not_zero: once alpha >> g is 0, alpha drops to 0.
        let decay = match self.alpha >> DCTCP_SHIFT_G {
            0 => self.alpha,
            d => d,
        };
        let mut alpha = self.alpha - decay;
        if delivered_ce > 0 {
            let delivered = (tcp.delivered - self.old_delivered).max(1);
            let increase = (delivered_ce << (10 - DCTCP_SHIFT_G)) / delivered;
            alpha = (alpha as u64 + increase).min(DCTCP_MAX_ALPHA as u64) as u32;
        }
        self.alpha = alpha;
        self.reset(tcp);
    }

    /// `dctcp_state`: entering Recovery halves (overwriting the alpha-based ssthresh
    /// `tcp_init_cwnd_reduction` just set).
    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        if !self.fallback_to_reno && new_state == CaState::Recovery && new_state != tcp.ca_state {
            self.react_to_loss(tcp);
        }
    }

    /// `dctcp_cwnd_event`: a timeout halves (once per window, as `tcp_enter_loss` calls it).
    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        if !self.fallback_to_reno && event == CwndEvent::Loss {
            self.react_to_loss(tcp);
        }
    }

    fn needs_ecn(&self) -> bool {
        !self.fallback_to_reno
    }

    fn telemetry(&self, tcp: &TcpState) -> CcTelemetry {
        CcTelemetry { ecn_alpha: (!self.fallback_to_reno).then(|| self.alpha()), ..CcTelemetry::window_based(tcp) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn established(cwnd: u32) -> (Dctcp, TcpState) {
        let mut tcp = TcpState::new(1448);
        tcp.ecn_ok = true;
        tcp.snd_cwnd = cwnd;
        tcp.is_cwnd_limited = true;
        let mut cc = Dctcp::default();
        cc.init(&mut tcp);
        (cc, tcp)
    }

    /// One window of `n` packets sent and acked, `marked` of them with ECE.
    fn window(cc: &mut Dctcp, tcp: &mut TcpState, n: u64, marked: u64) {
        tcp.snd_nxt += n;
        tcp.snd_una = tcp.snd_nxt;
        tcp.delivered += n;
        tcp.delivered_ce += marked;
        cc.in_ack_event(tcp);
    }

    #[test]
    fn alpha_follows_the_marked_fraction_with_gain_one_sixteenth() {
        // RFC 8257 section 3.3: alpha = (1 - g) alpha + g F. From 1 with F = 0.25,
        // it converges to 0.25 geometrically at 15/16 per window.
        let (mut cc, mut tcp) = established(100);
        let mut expected = 1.0f64;
        for _ in 0..200 {
            window(&mut cc, &mut tcp, 100, 25);
            expected = expected * 15.0 / 16.0 + 0.25 / 16.0;
            assert!((cc.alpha() - expected).abs() < 0.02, "alpha {} expected {expected}", cc.alpha());
        }
        assert!((cc.alpha() - 0.25).abs() < 0.02);
    }

    #[test]
    fn without_marks_alpha_decays_to_exactly_zero() {
        // min_not_zero(alpha, alpha >> g): below 16/1024 the decay takes all of it.
        let (mut cc, mut tcp) = established(100);
        for _ in 0..80 {
            window(&mut cc, &mut tcp, 100, 0);
        }
        assert_eq!(cc.alpha, 0);
    }

    #[test]
    fn alpha_moves_once_per_window_of_data() {
        let (mut cc, mut tcp) = established(100);
        // 200 sent, 100 acked: the first ACK closes the (empty) window of init and
        // opens one that ends at snd_nxt = 200.
        tcp.snd_nxt = 200;
        tcp.snd_una = 100;
        tcp.delivered = 100;
        cc.in_ack_event(&mut tcp);
        let after_first = cc.alpha;
        assert_eq!(after_first, 1024 - 64);
        // ACKs inside that window leave alpha alone...
        for una in [150, 199] {
            tcp.snd_una = una;
            tcp.delivered = una;
            cc.in_ack_event(&mut tcp);
            assert_eq!(cc.alpha, after_first);
        }
        // ...and the one that reaches its end moves it.
        tcp.snd_una = 200;
        tcp.delivered = 200;
        cc.in_ack_event(&mut tcp);
        assert_eq!(cc.alpha, after_first - (after_first >> 4));
    }

    #[test]
    fn an_echo_cuts_cwnd_by_half_of_alpha_and_a_loss_by_half() {
        let (mut cc, mut tcp) = established(100);
        // alpha = 1: the first echo halves, as Reno would.
        assert_eq!(cc.ssthresh(&tcp), 50);
        cc.alpha = 256; // a quarter of the packets marked
        assert_eq!(cc.ssthresh(&tcp), 100 - 100 * 256 / 2048);
        // Entering Recovery overwrites it with cwnd / 2 (dctcp_state).
        tcp.snd_ssthresh = cc.ssthresh(&tcp);
        cc.set_state(&mut tcp, CaState::Recovery);
        assert_eq!(tcp.snd_ssthresh, 50);
        // A timeout likewise.
        tcp.snd_ssthresh = 88;
        cc.cwnd_event(&mut tcp, CwndEvent::Loss);
        assert_eq!(tcp.snd_ssthresh, 50);
        assert_eq!(cc.undo_cwnd(&TcpState { snd_cwnd: 10, ..tcp.clone() }), 100);
    }

    #[test]
    fn without_negotiated_ecn_it_is_reno_and_asks_for_no_ect() {
        let mut tcp = TcpState::new(1448);
        tcp.snd_cwnd = 100;
        let mut cc = Dctcp::default();
        cc.init(&mut tcp);
        assert!(!cc.needs_ecn());
        assert_eq!(cc.ssthresh(&tcp), 50);
        assert_eq!(cc.telemetry(&tcp).ecn_alpha, None);
    }
}
