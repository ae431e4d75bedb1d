//! Delivery-rate sampling (draft-cheng-iccrg-delivery-rate-estimation,
//! Linux `tcp_rate.c`): each packet remembers how much had been delivered
//! when it was sent; an ACK turns that into a rate sample for the CC.

use cclab_cc::{RateSample, SimDuration, SimTime, TcpState};

/// What a packet records when it is (re)transmitted (`TCP_SKB_CB(skb)->tx`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TxRecord {
    /// `tx.first_tx_mstamp`: start of the send phase this packet belongs to.
    pub first_tx_time: SimTime,
    /// `tx.delivered_mstamp`; `None` once the packet's delivery was counted
    /// (Linux zeroes it when a packet is SACKed).
    pub delivered_time: Option<SimTime>,
    /// `tx.delivered`.
    pub delivered: u64,
    /// `tx.is_app_limited`.
    pub is_app_limited: bool,
    /// `tx.in_flight` (google/bbr v3 `tcp_set_tx_in_flight`): packets in
    /// flight once this packet's skb was sent. Set when new data is sent and
    /// kept across retransmissions, as the v3 kernel sets it in `tcp_write_xmit`.
    pub in_flight: u32,
    /// `tx.lost`: `tp->lost` when the packet was first sent (kept likewise).
    pub lost: u64,
    /// `tx.delivered_ce`: `tp->delivered_ce` at this (re)transmission.
    pub delivered_ce: u64,
}

/// `tp->app_limited` at connection start (Linux sets ~0U in `tcp_init_sock`):
/// the first window is app-limited until anything is delivered.
pub const APP_LIMITED_UNTIL_FIRST_DELIVERY: u64 = u64::MAX;

/// The connection-wide sampling state (`tp->first_tx_mstamp`); the delivered
/// count and its timestamp live in [`TcpState`] where the CC reads them.
#[derive(Clone, Copy, Debug, Default)]
pub struct RateSampler {
    pub first_tx_time: SimTime,
}

/// A rate sample under construction for one ACK.
#[derive(Clone, Copy, Debug, Default)]
pub struct SampleBuilder {
    pub prior_delivered: u64,
    pub prior_time: Option<SimTime>,
    pub send_interval: SimDuration,
    pub last_xmit_time: SimTime,
    pub last_end_seq: u64,
    pub is_app_limited: bool,
    pub is_retrans: bool,
    pub tx_in_flight: u32,
    pub prior_lost: u64,
    pub prior_delivered_ce: u64,
}

impl RateSampler {
    /// `tcp_rate_skb_sent`: stamps a packet as it leaves. `packets_out` is the
    /// count before this packet; with nothing outstanding the send phase restarts.
    /// The caller fills `in_flight` (and keeps `in_flight`/`lost` on a retransmission).
    pub fn on_send(&mut self, now: SimTime, packets_out: u64, tcp: &mut TcpState) -> TxRecord {
        if packets_out == 0 {
            self.first_tx_time = now;
            tcp.delivered_time = now;
        }
        TxRecord {
            first_tx_time: self.first_tx_time,
            delivered_time: Some(tcp.delivered_time),
            delivered: tcp.delivered,
            is_app_limited: tcp.app_limited != 0,
            in_flight: 0,
            lost: tcp.lost,
            delivered_ce: tcp.delivered_ce,
        }
    }

    /// `tcp_rate_skb_delivered`: a packet sent at `xmit_time` was (S)ACKed.
    /// The sample follows the most recently sent packet delivered by this ACK.
    pub fn on_delivered(&mut self, rec: &mut TxRecord, xmit_time: SimTime, end_seq: u64, retransmitted: bool, sacked: bool, rs: &mut SampleBuilder) {
        let Some(delivered_time) = rec.delivered_time else { return };
        if rs.prior_delivered == 0 || super::rack::sent_after(xmit_time, end_seq, self.first_tx_time, rs.last_end_seq) {
            rs.prior_delivered = rec.delivered;
            rs.prior_time = Some(delivered_time);
            rs.is_app_limited = rec.is_app_limited;
            rs.is_retrans = retransmitted;
            rs.last_end_seq = end_seq;
            rs.last_xmit_time = xmit_time;
            rs.tx_in_flight = rec.in_flight;
            rs.prior_lost = rec.lost;
            rs.prior_delivered_ce = rec.delivered_ce;
            self.first_tx_time = xmit_time;
            // The send phase: from the first packet of its window to this one.
            rs.send_interval = xmit_time.saturating_since(rec.first_tx_time);
        }
        if sacked {
            rec.delivered_time = None;
        }
    }
}

/// `tcp_rate_gen`: completes the sample after an ACK. `delivered_now`,
/// `lost_now` and `delivered_ce_now` are `tp->delivered`, `tp->lost` and
/// `tp->delivered_ce` after the ACK. Returns the sample and clears
/// `app_limited` once the bubble has been delivered.
#[allow(clippy::too_many_arguments)]
pub fn generate(
    rs: &SampleBuilder,
    now: SimTime,
    delivered_now: u64,
    lost_now: u64,
    delivered_ce_now: u64,
    newly_delivered: u32,
    newly_lost: u32,
    prior_in_flight: u32,
    min_rtt: Option<SimDuration>,
    rtt: Option<SimDuration>,
    app_limited: &mut u64,
) -> RateSample {
    let bubble_delivered = match *app_limited {
        0 => false,
        APP_LIMITED_UNTIL_FIRST_DELIVERY => delivered_now > 0,
        until => delivered_now > until,
    };
    if bubble_delivered {
        *app_limited = 0;
    }
    let mut sample = RateSample {
        acked_sacked: newly_delivered,
        losses: newly_lost,
        prior_in_flight,
        rtt,
        is_app_limited: rs.is_app_limited,
        is_retrans: rs.is_retrans,
        ..RateSample::default()
    };
    let Some(prior_time) = rs.prior_time else {
        return sample; // no timing information: invalid sample
    };
    sample.prior_delivered = rs.prior_delivered;
    sample.delivered = delivered_now - rs.prior_delivered;
    // google/bbr v3 tcp_rate_gen: the loss and CE counts over the same span.
    sample.tx_in_flight = rs.tx_in_flight;
    sample.lost = lost_now - rs.prior_lost;
    sample.delivered_ce = delivered_ce_now - rs.prior_delivered_ce;
    // Sending and ACKing are separate pipeline phases; use the longer so ACK
    // compression cannot inflate the rate.
    let ack_interval = now.saturating_since(prior_time);
    let interval = rs.send_interval.max(ack_interval);
    // An interval shorter than min_rtt means a bogus sample (Linux tcp_rate_gen).
    if min_rtt.is_some_and(|m| interval < m) {
        return sample;
    }
    sample.interval = Some(interval);
    sample
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_window_acked_one_rtt_later_samples_the_sending_rate() {
        let mut sampler = RateSampler::default();
        let mut tcp = TcpState::new(1448);
        // 10 packets sent 1 ms apart from t = 0, nothing delivered yet.
        let mut recs: Vec<TxRecord> = (0..10).map(|i| sampler.on_send(SimTime(i * MS), i, &mut tcp)).collect();
        // All ACKed together at t = 100 ms (delivered becomes 10).
        let mut rs = SampleBuilder::default();
        for (i, rec) in recs.iter_mut().enumerate() {
            sampler.on_delivered(rec, SimTime(i as u64 * MS), i as u64, false, false, &mut rs);
        }
        let mut app_limited = 0;
        let sample = generate(&rs, SimTime(100 * MS), 10, 0, 0, 10, 0, 10, Some(SimDuration(50 * MS)), None, &mut app_limited);
        assert_eq!(sample.delivered, 10);
        // ack interval 100 ms > send interval 9 ms.
        assert_eq!(sample.interval, Some(SimDuration(100 * MS)));
    }

    #[test]
    fn a_sample_shorter_than_min_rtt_is_invalid() {
        let mut sampler = RateSampler::default();
        let mut rec = sampler.on_send(SimTime(0), 0, &mut TcpState::new(1448));
        let mut rs = SampleBuilder::default();
        sampler.on_delivered(&mut rec, SimTime(0), 0, false, false, &mut rs);
        let mut app_limited = 0;
        let sample = generate(&rs, SimTime(10 * MS), 1, 0, 0, 1, 0, 1, Some(SimDuration(20 * MS)), None, &mut app_limited);
        assert_eq!(sample.interval, None);
    }

    #[test]
    fn a_sacked_packet_is_counted_once() {
        let mut sampler = RateSampler::default();
        let mut rec = sampler.on_send(SimTime(0), 0, &mut TcpState::new(1448));
        let mut rs = SampleBuilder::default();
        sampler.on_delivered(&mut rec, SimTime(0), 0, false, true, &mut rs);
        assert!(rec.delivered_time.is_none());
        let mut rs2 = SampleBuilder::default();
        sampler.on_delivered(&mut rec, SimTime(0), 0, false, false, &mut rs2);
        assert!(rs2.prior_time.is_none());
    }

    #[test]
    fn packets_sent_after_a_delivery_are_stamped_with_its_time() {
        // The sample interval must start at the latest delivery, not the connection start.
        let mut sampler = RateSampler::default();
        let mut tcp = TcpState::new(1448);
        sampler.on_send(SimTime(0), 0, &mut tcp);
        tcp.delivered = 1;
        tcp.delivered_time = SimTime(40 * MS);
        let rec = sampler.on_send(SimTime(41 * MS), 1, &mut tcp);
        assert_eq!(rec.delivered_time, Some(SimTime(40 * MS)));
        assert_eq!(rec.delivered, 1);
    }

    #[test]
    fn the_first_window_is_app_limited_until_something_is_delivered() {
        let rs = SampleBuilder::default();
        let mut app_limited = APP_LIMITED_UNTIL_FIRST_DELIVERY;
        generate(&rs, SimTime(0), 0, 0, 0, 0, 0, 1, None, None, &mut app_limited);
        assert_eq!(app_limited, APP_LIMITED_UNTIL_FIRST_DELIVERY);
        generate(&rs, SimTime(0), 1, 0, 0, 1, 0, 1, None, None, &mut app_limited);
        assert_eq!(app_limited, 0);
    }

    #[test]
    fn app_limited_clears_once_the_bubble_is_delivered() {
        let rs = SampleBuilder::default();
        let mut app_limited = 50;
        generate(&rs, SimTime(0), 50, 0, 0, 1, 0, 1, None, None, &mut app_limited);
        assert_eq!(app_limited, 50);
        generate(&rs, SimTime(0), 51, 0, 0, 1, 0, 1, None, None, &mut app_limited);
        assert_eq!(app_limited, 0);
    }
}
