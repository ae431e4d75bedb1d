//! Per-round congestion signals: the rate and volume delivered in the
//! latest round (`bw_latest`, `inflight_latest`), whether the round saw loss
//! or ECN, and the loss reported packet by packet through `skb_marked_lost`
//! (v3 `bbr_update_latest_delivery_signals`, `bbr_advance_latest_delivery_signals`,
//! `bbr_update_congestion_signals`, `bbr_note_loss`, `bbr_skb_marked_lost`,
//! `bbr_inflight_hi_from_lost_skb`; v2alpha `bbr2_update_congestion_signals`).

use super::{Bbr3, Version, UNSET};
use crate::bbr::{BBR_SCALE, BBR_UNIT};
use crate::{LostPacket, RateSample, TcpState};

impl Bbr3 {
    /// `bbr_update_latest_delivery_signals` (v3; v2alpha does this inside
    /// `update_congestion_signals`): max rate and volume over the loss round,
    /// and whether a new loss round starts.
    pub(super) fn update_latest_delivery_signals(&mut self, tcp: &TcpState, rs: &RateSample, sample_bw: u64) {
        self.loss_round_start = false;
        if rs.interval.is_none_or(|i| i.as_micros() == 0) || rs.acked_sacked == 0 {
            return; // not a valid observation
        }
        self.bw_latest = self.bw_latest.max(sample_bw);
        self.inflight_latest = self.inflight_latest.max(rs.delivered as u32);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = tcp.delivered;
            self.loss_round_start = true;
        }
    }

    /// `bbr_advance_latest_delivery_signals`: once per loss round, restart
    /// the latest-round filters at this sample. (The kernel keeps them when the
    /// ACK matches a TLP retransmit; the simulator's rate sample does not say.)
    pub(super) fn advance_latest_delivery_signals(&mut self, rs: &RateSample, sample_bw: u64) {
        if self.loss_round_start {
            self.bw_latest = sample_bw;
            self.inflight_latest = rs.delivered as u32;
        }
    }

    /// `bbr_update_congestion_signals`: feed the max filter, note loss, and
    /// once per round adapt the lower bounds.
    pub(super) fn update_congestion_signals(&mut self, tcp: &TcpState, rs: &RateSample, sample_bw: u64) {
        if self.p.version == Version::V2Alpha {
            self.loss_round_start = false;
        }
        if rs.interval.is_none_or(|i| i.as_micros() == 0) || rs.acked_sacked == 0 {
            return;
        }
        if !rs.is_app_limited || sample_bw >= self.max_bw() {
            self.max_bw[1] = self.max_bw[1].max(sample_bw); // bbr_take_max_bw_sample
        }
        self.loss_in_round |= rs.losses > 0;
        if self.p.version == Version::V2Alpha {
            self.bw_latest = self.bw_latest.max(sample_bw);
            self.inflight_latest = self.inflight_latest.max(rs.delivered as u32);
            if rs.prior_delivered < self.loss_round_delivered {
                return;
            }
            self.loss_round_delivered = tcp.delivered;
            self.loss_round_start = true;
        } else if !self.loss_round_start {
            return; // per-round updates only
        }
        self.adapt_lower_bounds(tcp);
        self.loss_in_round = false;
        self.ecn_in_round = false;
        if self.p.version == Version::V2Alpha {
            self.bw_latest = sample_bw;
            self.inflight_latest = rs.delivered as u32;
        }
    }

    /// `bbr_reset_congestion_signals`: after probing, start afresh.
    pub(super) fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.ecn_in_round = false;
        self.loss_in_cycle = false;
        self.ecn_in_cycle = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    /// `bbr_note_loss`: this round is a loss round, measured over a full
    /// round from the first loss.
    fn note_loss(&mut self, tcp: &TcpState) {
        if !self.loss_in_round {
            self.loss_round_delivered = tcp.delivered;
        }
        self.loss_in_round = true;
        self.loss_in_cycle = true;
    }

    /// `bbr_skb_marked_lost`: while probing, judge the loss rate of the flight
    /// that led up to this packet, and if it is too high, find where.
    pub(super) fn on_skb_marked_lost(&mut self, tcp: &TcpState, pkt: &LostPacket) {
        self.note_loss(tcp);
        if !self.bw_probe_samples || !pkt.has_delivered_time {
            return; // not sent while probing, or already SACKed
        }
        let mut rs = RateSample {
            tx_in_flight: pkt.tx_in_flight,
            lost: tcp.lost - pkt.tx_lost,
            is_app_limited: pkt.is_app_limited,
            ..RateSample::default()
        };
        if self.p.version == Version::V2Alpha {
            rs.delivered_ce = tcp.delivered_ce - pkt.tx_delivered_ce;
        }
        if self.is_inflight_too_high(&rs) {
            rs.tx_in_flight = self.inflight_hi_from_lost_skb(&rs);
            self.handle_inflight_too_high(tcp, &rs);
        }
    }

    /// `bbr_inflight_hi_from_lost_skb`: the inflight at which the loss rate
    /// crossed `loss_thresh`, solving
    /// (lost_prev + prefix) / (inflight_prev + prefix) = loss_thresh for prefix.
    /// Each simulated packet is its own skb (pcount 1).
    pub(super) fn inflight_hi_from_lost_skb(&self, rs: &RateSample) -> u32 {
        let pcount = 1u64;
        let Some(inflight_prev) = (rs.tx_in_flight as u64).checked_sub(pcount) else { return UNSET };
        let Some(lost_prev) = rs.lost.checked_sub(pcount) else { return UNSET };
        let loss_thresh = self.p.loss_thresh as u64;
        let loss_budget = (inflight_prev * loss_thresh + BBR_UNIT as u64 - 1) >> BBR_SCALE;
        let lost_prefix = if lost_prev >= loss_budget {
            0 // earlier losses had crossed the threshold already
        } else {
            ((loss_budget - lost_prev) << BBR_SCALE) / (BBR_UNIT as u64 - loss_thresh)
        };
        (inflight_prev + lost_prefix) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Harness;
    use super::super::Params;
    use super::*;

    #[test]
    fn the_loss_prefix_puts_inflight_hi_where_the_loss_rate_crossed_two_percent() {
        let h = Harness::cruising(Params::V3);
        // 100 in flight when sent, 3 lost so far (this one included): before
        // it 99 in flight, 2 lost; budget ceil(99 x 5/256) = 2 <= 2: at 99.
        let rs = RateSample { tx_in_flight: 100, lost: 3, ..RateSample::default() };
        assert_eq!(h.bbr.inflight_hi_from_lost_skb(&rs), 99);
        // 1 lost before it: prefix (2 - 1) x 256 / 251 = 1: at 100.
        let rs = RateSample { tx_in_flight: 100, lost: 2, ..RateSample::default() };
        assert_eq!(h.bbr.inflight_hi_from_lost_skb(&rs), 100);
    }

    #[test]
    fn a_loss_while_probing_at_high_loss_rate_cuts_inflight_hi_and_ends_probe_up() {
        let mut h = Harness::cruising(Params::V3);
        h.start_probe_up();
        h.bbr.inflight_hi = 300;
        h.tcp.lost = 10;
        // Sent with 100 in flight and 0 lost before: 10 of 100 lost > 2%.
        let pkt = LostPacket { tx_in_flight: 100, tx_lost: 0, has_delivered_time: true, ..LostPacket::default() };
        crate::CongestionControl::skb_marked_lost(&mut h.bbr, &h.tcp, &pkt);
        // lost_prev 9 >= budget 2: inflight_hi = max(99, 0.7 x target).
        let target = h.bbr.target_inflight(&h.tcp);
        assert_eq!(h.bbr.inflight_hi, 99.max(target * 180 / 256));
        assert_eq!(h.bbr.mode_name(), "probe_bw_down");
        assert!(h.bbr.prev_probe_too_high);
    }
}
