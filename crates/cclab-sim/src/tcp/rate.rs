//! Delivery-rate sampling (draft-cheng-iccrg-delivery-rate-estimation,
//! Linux `tcp_rate.c`): each packet remembers how much had been delivered
//! when it was sent; an ACK turns that into a rate sample for the CC.

use cclab_cc::{RateSample, SimDuration, SimTime};

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
}

/// The connection-wide sampling state (`tp->first_tx_mstamp`, `delivered_mstamp`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RateSampler {
    pub first_tx_time: SimTime,
    pub delivered_time: SimTime,
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
}

impl RateSampler {
    /// `tcp_rate_skb_sent`: stamps a packet as it leaves. `packets_out` is the
    /// count before this packet; with nothing outstanding the send phase restarts.
    pub fn on_send(&mut self, now: SimTime, packets_out: u64, delivered: u64, app_limited: bool) -> TxRecord {
        if packets_out == 0 {
            self.first_tx_time = now;
            self.delivered_time = now;
        }
        TxRecord {
            first_tx_time: self.first_tx_time,
            delivered_time: Some(self.delivered_time),
            delivered,
            is_app_limited: app_limited,
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
            self.first_tx_time = xmit_time;
            // The send phase: from the first packet of its window to this one.
            rs.send_interval = xmit_time.saturating_since(rec.first_tx_time);
        }
        if sacked {
            rec.delivered_time = None;
        }
    }
}

/// `tcp_rate_gen`: completes the sample after an ACK. `delivered_now` is
/// `tp->delivered` after the ACK. Returns the sample and clears `app_limited`
/// once the bubble has been delivered.
#[allow(clippy::too_many_arguments)]
pub fn generate(
    rs: &SampleBuilder,
    now: SimTime,
    delivered_now: u64,
    newly_delivered: u32,
    newly_lost: u32,
    prior_in_flight: u32,
    min_rtt: Option<SimDuration>,
    rtt: Option<SimDuration>,
    app_limited: &mut u64,
) -> RateSample {
    if *app_limited != 0 && delivered_now > *app_limited {
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
        // 10 packets sent 1 ms apart from t = 0, nothing delivered yet.
        let mut recs: Vec<TxRecord> = (0..10).map(|i| sampler.on_send(SimTime(i * MS), i, 0, false)).collect();
        // All ACKed together at t = 100 ms (delivered becomes 10).
        let mut rs = SampleBuilder::default();
        for (i, rec) in recs.iter_mut().enumerate() {
            sampler.on_delivered(rec, SimTime(i as u64 * MS), i as u64, false, false, &mut rs);
        }
        let mut app_limited = 0;
        let sample = generate(&rs, SimTime(100 * MS), 10, 10, 0, 10, Some(SimDuration(50 * MS)), None, &mut app_limited);
        assert_eq!(sample.delivered, 10);
        // ack interval 100 ms > send interval 9 ms.
        assert_eq!(sample.interval, Some(SimDuration(100 * MS)));
    }

    #[test]
    fn a_sample_shorter_than_min_rtt_is_invalid() {
        let mut sampler = RateSampler::default();
        let mut rec = sampler.on_send(SimTime(0), 0, 0, false);
        let mut rs = SampleBuilder::default();
        sampler.on_delivered(&mut rec, SimTime(0), 0, false, false, &mut rs);
        let mut app_limited = 0;
        let sample = generate(&rs, SimTime(10 * MS), 1, 1, 0, 1, Some(SimDuration(20 * MS)), None, &mut app_limited);
        assert_eq!(sample.interval, None);
    }

    #[test]
    fn a_sacked_packet_is_counted_once() {
        let mut sampler = RateSampler::default();
        let mut rec = sampler.on_send(SimTime(0), 0, 0, false);
        let mut rs = SampleBuilder::default();
        sampler.on_delivered(&mut rec, SimTime(0), 0, false, true, &mut rs);
        assert!(rec.delivered_time.is_none());
        let mut rs2 = SampleBuilder::default();
        sampler.on_delivered(&mut rec, SimTime(0), 0, false, false, &mut rs2);
        assert!(rs2.prior_time.is_none());
    }

    #[test]
    fn app_limited_clears_once_the_bubble_is_delivered() {
        let rs = SampleBuilder::default();
        let mut app_limited = 50;
        generate(&rs, SimTime(0), 50, 1, 0, 1, None, None, &mut app_limited);
        assert_eq!(app_limited, 50);
        generate(&rs, SimTime(0), 51, 1, 0, 1, None, None, &mut app_limited);
        assert_eq!(app_limited, 0);
    }
}
