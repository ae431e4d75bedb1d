//! Proportional Rate Reduction (RFC 6937), as Linux `tcp_cwnd_reduction`
//! implements it (including the newer rule that skips the +1 slow-start
//! allowance on an ACK that also marked new losses).

/// PRR's state for one recovery episode (`tp->prr_delivered`, `tp->prr_out`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Prr {
    /// cwnd when recovery began (`tp->prior_cwnd`, RFC 6937 RecoverFS).
    pub prior_cwnd: u32,
    /// Packets delivered to the receiver since recovery began.
    pub delivered: u32,
    /// Packets sent since recovery began.
    pub out: u32,
}

impl Prr {
    pub fn start(prior_cwnd: u32) -> Self {
        Prr { prior_cwnd, delivered: 0, out: 0 }
    }

    /// The new cwnd after an ACK that (S)ACKed `newly_acked_sacked` packets.
    /// Returns `None` when the ACK delivered nothing (cwnd unchanged).
    pub fn on_ack(
        &mut self,
        ssthresh: u32,
        in_flight: u32,
        newly_acked_sacked: u32,
        newly_lost: u32,
        snd_una_advanced: bool,
    ) -> Option<u32> {
        if newly_acked_sacked == 0 || self.prior_cwnd == 0 {
            return None;
        }
        self.delivered += newly_acked_sacked;
        let delta = ssthresh as i64 - in_flight as i64;
        let mut sndcnt: i64 = if delta < 0 {
            // Proportional part: sndcnt = ceil(ssthresh * prr_delivered / RecoverFS) - prr_out
            let dividend = ssthresh as u64 * self.delivered as u64 + self.prior_cwnd as u64 - 1;
            (dividend / self.prior_cwnd as u64) as i64 - self.out as i64
        } else {
            // Slow-start reduction bound: catch up to ssthresh, at most one
            // more than was delivered (RFC 6937 PRR-SSRB).
            let mut s = (self.delivered as i64 - self.out as i64).max(newly_acked_sacked as i64);
            if snd_una_advanced && newly_lost == 0 {
                s += 1;
            }
            s.min(delta)
        };
        // Force a fast retransmit on entering recovery.
        if self.out == 0 {
            sndcnt = sndcnt.max(1);
        }
        Some((in_flight as i64 + sndcnt.max(0)) as u32)
    }

    pub fn on_send(&mut self, pkts: u32) {
        self.out += pkts;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn above_ssthresh_prr_sends_in_proportion_to_deliveries() {
        // RFC 6937's example: RecoverFS = 20, ssthresh = 10; one packet lost.
        let mut prr = Prr::start(20);
        // First ACK delivers 1 with 19 in flight: ceil(10*1/20) = 1 -> cwnd 19 + 1.
        assert_eq!(prr.on_ack(10, 19, 1, 1, false), Some(20));
        prr.on_send(1);
        // Second ACK: ceil(10*2/20) - 1 = 0 -> nothing new may be sent.
        assert_eq!(prr.on_ack(10, 18, 1, 0, false), Some(18));
        // Third: ceil(10*3/20) - 1 = 1.
        assert_eq!(prr.on_ack(10, 17, 1, 0, false), Some(18));
    }

    #[test]
    fn over_a_whole_recovery_prr_sends_about_ssthresh_per_recoverfs_delivered() {
        let mut prr = Prr::start(40);
        let mut in_flight = 39;
        let mut sent = 0;
        for _ in 0..40 {
            in_flight -= 1;
            if let Some(cwnd) = prr.on_ack(20, in_flight, 1, 0, false) {
                let quota = cwnd.saturating_sub(in_flight);
                prr.on_send(quota);
                sent += quota;
                in_flight += quota;
            }
        }
        assert!((19..=21).contains(&sent), "sent {sent}");
    }

    #[test]
    fn below_ssthresh_prr_grows_like_slow_start_but_not_past_ssthresh() {
        let mut prr = Prr::start(20);
        prr.on_send(1);
        // in_flight 5 is far below ssthresh 10: send delivered + 1 = 3.
        assert_eq!(prr.on_ack(10, 5, 2, 0, true), Some(8));
        // With new losses on the same ACK the +1 is withheld.
        let mut prr2 = Prr::start(20);
        prr2.on_send(1);
        assert_eq!(prr2.on_ack(10, 5, 2, 1, true), Some(7));
        // Never beyond ssthresh.
        let mut prr3 = Prr::start(20);
        prr3.on_send(1);
        assert_eq!(prr3.on_ack(10, 9, 5, 0, true), Some(10));
    }

    #[test]
    fn the_first_ack_of_recovery_always_allows_one_retransmission() {
        // in_flight already at ssthresh: PRR-SSRB alone would allow nothing.
        let mut prr = Prr::start(20);
        assert_eq!(prr.on_ack(10, 10, 1, 1, false), Some(11));
        prr.on_send(1);
        assert_eq!(prr.on_ack(10, 10, 1, 0, false), Some(10));
    }

    #[test]
    fn an_ack_that_delivers_nothing_leaves_cwnd_alone() {
        let mut prr = Prr::start(10);
        assert_eq!(prr.on_ack(5, 8, 0, 0, false), None);
    }
}
