// SPDX-License-Identifier: MIT
/* bbr3.bpf.c's model.h: The per-ACK model, STARTUP/DRAIN/PROBE_RTT, and cwnd (tcp_bbr.c v3). */
#pragma once

/* --- The model (tcp_bbr.c v3 bbr_update_model and its parts) --------------- */
static __always_inline void bbr_update_round_start(struct sock *sk, struct bbr3 *bbr, const struct rate_sample *rs)
{
	bbr->round_start = 0;
	if (rs->interval_us > 0 && !before(rs->prior_delivered, bbr->next_rtt_delivered)) {
		bbr->next_rtt_delivered = tcp_sk(sk)->delivered;
		bbr->round_start = 1;
	}
}

/* bbr_calculate_bw_sample(): rounded up (v1 truncates). */
static __always_inline __u32 bbr_calculate_bw_sample(const struct rate_sample *rs)
{
	__u64 bw;

	if (rs->interval_us <= 0 || rs->delivered < 0)
		return 0;
	bw = ((__u64)rs->delivered * BW_UNIT + (__u64)rs->interval_us - 1) / (__u64)rs->interval_us;
	return (__u32)bw;
}

static __always_inline void bbr_update_latest_delivery_signals(struct sock *sk, struct bbr3 *bbr,
							      const struct rate_sample *rs, const struct v3_sample *v3)
{
	bbr->loss_round_start = 0;
	if (rs->interval_us <= 0 || !rs->acked_sacked)
		return;
	bbr->bw_latest = max_u32(bbr->bw_latest, v3->sample_bw);
	bbr->inflight_latest = max_u32(bbr->inflight_latest, (__u32)rs->delivered);
	if (!before(rs->prior_delivered, bbr->loss_round_delivered)) {
		bbr->loss_round_delivered = tcp_sk(sk)->delivered;
		bbr->loss_round_start = 1;
	}
}

/* bbr_advance_latest_delivery_signals() (is_acking_tlp_retrans_seq: false). */
static __always_inline void bbr_advance_latest_delivery_signals(struct bbr3 *bbr, const struct rate_sample *rs,
							       const struct v3_sample *v3)
{
	if (bbr->loss_round_start) {
		bbr->bw_latest = v3->sample_bw;
		bbr->inflight_latest = (__u32)rs->delivered;
	}
}

/* bbr_adapt_lower_bounds(): outside bw probing, cut bw_lo and inflight_lo to
 * 0.7x once per lossy round, never below this round's delivery. */
static __always_inline void bbr_adapt_lower_bounds(struct sock *sk, struct bbr3 *bbr)
{
	__u32 loss_cut = BBR_UNIT - bbr_beta;

	if (bbr_is_probing_bandwidth(bbr))
		return;
	if (bbr->loss_in_round) {
		/* bbr_init_lower_bounds(sk, true) */
		if (bbr->bw_lo == ~0U)
			bbr->bw_lo = bbr_max_bw(bbr);
		if (bbr->inflight_lo == ~0U)
			bbr->inflight_lo = tcp_sk(sk)->snd_cwnd;
		/* bbr_loss_lower_bounds() */
		bbr->bw_lo = max_u32(bbr->bw_latest, (__u32)(((__u64)bbr->bw_lo * loss_cut) >> BBR_SCALE));
		bbr->inflight_lo = max_u32(bbr->inflight_latest,
					   (__u32)(((__u64)bbr->inflight_lo * loss_cut) >> BBR_SCALE));
		count(STAT_LOWER_BOUNDS);
	}
	if (!bbr_v2alpha) /* v2alpha lets bw_lo reach 0 */
		bbr->bw_lo = max_u32(1, bbr->bw_lo);
}

static __always_inline void bbr_update_congestion_signals(struct sock *sk, struct bbr3 *bbr,
							 const struct rate_sample *rs, const struct v3_sample *v3)
{
	if (rs->interval_us <= 0 || !rs->acked_sacked)
		return;
	if (!rs->is_app_limited || v3->sample_bw >= bbr_max_bw(bbr))
		bbr->bw_hi[1] = max_u32(v3->sample_bw, bbr->bw_hi[1]); /* bbr_take_max_bw_sample() */
	bbr->loss_in_round |= (rs->losses > 0);
	if (!bbr->loss_round_start)
		return;
	bbr_adapt_lower_bounds(sk, bbr);
	bbr->loss_in_round = 0;
}

/* tcp_bbr2.c bbr2_update_congestion_signals(): v3's latest-delivery signals
 * and congestion signals in one, run only when the model is updated. */
static __always_inline void bbr2_update_congestion_signals(struct sock *sk, struct bbr3 *bbr,
							  const struct rate_sample *rs, const struct v3_sample *v3)
{
	bbr->loss_round_start = 0;
	if (rs->interval_us <= 0 || !rs->acked_sacked)
		return;
	if (!rs->is_app_limited || v3->sample_bw >= bbr_max_bw(bbr))
		bbr->bw_hi[1] = max_u32(v3->sample_bw, bbr->bw_hi[1]); /* bbr2_take_max_bw_sample(): max_bw[1] */
	bbr->loss_in_round |= (rs->losses > 0);
	bbr->bw_latest = max_u32(bbr->bw_latest, v3->sample_bw);
	bbr->inflight_latest = max_u32(bbr->inflight_latest, (__u32)rs->delivered);
	if (before(rs->prior_delivered, bbr->loss_round_delivered))
		return;
	bbr->loss_round_delivered = tcp_sk(sk)->delivered;
	bbr->loss_round_start = 1;
	bbr_adapt_lower_bounds(sk, bbr);
	bbr->loss_in_round = 0;
	bbr->ecn_in_round = 0;
	bbr->bw_latest = v3->sample_bw;
	bbr->inflight_latest = (__u32)rs->delivered;
}

static __always_inline void bbr_update_ack_aggregation(struct sock *sk, struct bbr3 *bbr, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 win_thresh = bbr_extra_acked_win_rtts;
	__u32 epoch_us, expected_acked, extra_acked, cur;

	if (rs->acked_sacked <= 0 || rs->delivered < 0 || rs->interval_us <= 0)
		return;
	if (bbr->round_start) {
		bbr->extra_acked_win_rtts = min_u32(0x1F, bbr->extra_acked_win_rtts + 1);
		if (!bbr->full_bw_reached)
			win_thresh = 1; /* v3: 1-2 rounds in STARTUP */
		if (bbr->extra_acked_win_rtts >= win_thresh) {
			bbr->extra_acked_win_rtts = 0;
			bbr->extra_acked_win_idx = bbr->extra_acked_win_idx ? 0 : 1;
			if (bbr->extra_acked_win_idx)
				bbr->extra_acked[1] = 0;
			else
				bbr->extra_acked[0] = 0;
		}
	}
	epoch_us = tcp_stamp_us_delta(tp->delivered_mstamp, bbr->ack_epoch_mstamp);
	expected_acked = (__u32)(((__u64)bbr_bw(bbr) * epoch_us) / BW_UNIT);
	if (bbr->ack_epoch_acked <= expected_acked ||
	    bbr->ack_epoch_acked + rs->acked_sacked >= bbr_ack_epoch_acked_reset_thresh) {
		bbr->ack_epoch_acked = 0;
		bbr->ack_epoch_mstamp = tp->delivered_mstamp;
		expected_acked = 0;
	}
	bbr->ack_epoch_acked = min_u32(0xFFFFF, bbr->ack_epoch_acked + rs->acked_sacked);
	extra_acked = min_u32(bbr->ack_epoch_acked - expected_acked, tp->snd_cwnd);
	cur = bbr->extra_acked_win_idx ? bbr->extra_acked[1] : bbr->extra_acked[0];
	if (extra_acked > cur) {
		if (bbr->extra_acked_win_idx)
			bbr->extra_acked[1] = (__u16)extra_acked;
		else
			bbr->extra_acked[0] = (__u16)extra_acked;
	}
}

static __always_inline void bbr_handle_queue_too_high_in_startup(struct sock *sk, struct bbr3 *bbr)
{
	__u32 bdp = bbr_inflight(sk, bbr, bbr_max_bw(bbr), BBR_UNIT);

	bbr->full_bw_reached = 1;
	/* v3 keeps what the latest round delivered if more; v2alpha takes the BDP. */
	bbr->inflight_hi = bbr_v2alpha ? bdp : max_u32(bdp, bbr->inflight_latest);
}

static __always_inline void bbr_check_loss_too_high_in_startup(struct sock *sk, struct bbr3 *bbr,
							      const struct rate_sample *rs, const struct v3_sample *v3)
{
	if (bbr->full_bw_reached)
		return;
	if (rs->losses && bbr->loss_events_in_round < 0xf)
		bbr->loss_events_in_round++;
	if (bbr_full_loss_cnt && bbr->loss_round_start && inet_csk(sk)->icsk_ca_state == TCP_CA_Recovery &&
	    bbr->loss_events_in_round >= bbr_full_loss_cnt && bbr_is_inflight_too_high(v3)) {
		bbr_handle_queue_too_high_in_startup(sk, bbr);
		return;
	}
	if (bbr->loss_round_start)
		bbr->loss_events_in_round = 0;
}

/* tcp_bbr2.c keeps v1's bbr_check_full_bw_reached(): once a round, the max
 * filter against full_bw (v3 checks every sample, as PROBE_UP also uses it). */
static __always_inline void bbr2_check_full_bw_reached(struct bbr3 *bbr, const struct rate_sample *rs)
{
	__u32 bw_thresh;

	if (bbr->full_bw_reached || !bbr->round_start || rs->is_app_limited)
		return;
	bw_thresh = (__u32)(((__u64)bbr->full_bw * bbr_full_bw_thresh) >> BBR_SCALE);
	if (bbr_max_bw(bbr) >= bw_thresh) {
		bbr->full_bw = bbr_max_bw(bbr);
		bbr->full_bw_cnt = 0;
		return;
	}
	++bbr->full_bw_cnt;
	bbr->full_bw_reached = bbr->full_bw_cnt >= bbr_full_bw_cnt;
}

static __always_inline void bbr_check_full_bw_reached(struct bbr3 *bbr, const struct rate_sample *rs,
						      const struct v3_sample *v3)
{
	__u32 bw_thresh;

	if (bbr_v2alpha) {
		bbr2_check_full_bw_reached(bbr, rs);
		return;
	}
	if (bbr->full_bw_now || rs->is_app_limited)
		return;
	bw_thresh = (__u32)(((__u64)bbr->full_bw * bbr_full_bw_thresh) >> BBR_SCALE);
	if (v3->sample_bw >= bw_thresh) {
		bbr_reset_full_bw(bbr);
		bbr->full_bw = v3->sample_bw;
		return;
	}
	if (!bbr->round_start)
		return;
	++bbr->full_bw_cnt;
	bbr->full_bw_now = bbr->full_bw_cnt >= bbr_full_bw_cnt;
	bbr->full_bw_reached |= bbr->full_bw_now;
}

static __always_inline void bbr_check_drain(struct sock *sk, struct bbr3 *bbr)
{
	if (bbr->mode == BBR3_STARTUP && bbr->full_bw_reached) {
		bbr->mode = BBR3_DRAIN;
		tcp_sk(sk)->snd_ssthresh = bbr_inflight(sk, bbr, bbr_max_bw(bbr), BBR_UNIT);
		bbr_reset_congestion_signals(bbr);
	}
	if (bbr->mode == BBR3_DRAIN &&
	    bbr_packets_in_net_at_edt(sk, bbr, tcp_packets_in_flight(tcp_sk(sk))) <=
		    bbr_inflight(sk, bbr, bbr_max_bw(bbr), BBR_UNIT)) {
		bbr->mode = BBR3_PROBE_BW;
		bbr_start_bw_probe_down(sk, bbr);
	}
}

static __always_inline void bbr_exit_probe_rtt(struct sock *sk, struct bbr3 *bbr)
{
	bbr_reset_lower_bounds(bbr);
	if (bbr->full_bw_reached) {
		bbr->mode = BBR3_PROBE_BW;
		bbr_start_bw_probe_down(sk, bbr);
		bbr_start_bw_probe_cruise(bbr);
	} else {
		bbr->mode = BBR3_STARTUP;
	}
}

static __always_inline void bbr_check_probe_rtt_done(struct sock *sk, struct bbr3 *bbr)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!(bbr->probe_rtt_done_stamp && after(tcp_jiffies32(), bbr->probe_rtt_done_stamp)))
		return;
	bbr->probe_rtt_min_stamp = tcp_jiffies32();
	tp->snd_cwnd = max_u32(tp->snd_cwnd, bbr->prior_cwnd);
	bbr_exit_probe_rtt(sk, bbr);
}

/* bbr_update_min_rtt() (v3): a 5 s probe_rtt_min filter times PROBE_RTT,
 * which holds cwnd at 0.5 x BDP. */
static __always_inline void bbr_update_min_rtt(struct sock *sk, struct bbr3 *bbr, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 now = tcp_jiffies32();
	bool probe_rtt_expired, min_rtt_expired;

	probe_rtt_expired = after(now, bbr->probe_rtt_min_stamp + msecs_to_jiffies(bbr_probe_rtt_win_ms));
	/* v2alpha also refreshes the stamp on an equal sample (<=). */
	if (rs->rtt_us >= 0 &&
	    (rs->rtt_us < bbr->probe_rtt_min_us || (bbr_v2alpha && rs->rtt_us == bbr->probe_rtt_min_us) ||
	     (probe_rtt_expired && !rs->is_ack_delayed))) {
		if (!probe_rtt_expired && bbr->mode == BBR3_PROBE_BW)
			record_max(STAT_PROBE_RTT_LAST_POSTPONED_MS, jiffies_to_msecs(now - bbr->init_stamp));
		bbr->probe_rtt_min_us = (__u32)rs->rtt_us;
		bbr->probe_rtt_min_stamp = now;
	}
	min_rtt_expired = after(now, bbr->min_rtt_stamp + bbr_min_rtt_win_sec * HZ);
	if (bbr->probe_rtt_min_us <= bbr->min_rtt_us || min_rtt_expired) {
		bbr->min_rtt_us = bbr->probe_rtt_min_us;
		bbr->min_rtt_stamp = bbr->probe_rtt_min_stamp;
	}
	if (bbr_probe_rtt_mode_ms > 0 && probe_rtt_expired && !bbr->idle_restart && bbr->mode != BBR3_PROBE_RTT) {
		bbr->mode = BBR3_PROBE_RTT;
		bbr_save_cwnd(sk, bbr);
		bbr->probe_rtt_done_stamp = 0;
		bbr->ack_phase = ACKS_PROBE_STOPPING;
		bbr->next_rtt_delivered = tp->delivered;
	}
	if (bbr->mode == BBR3_PROBE_RTT) {
		__u32 limited = tp->delivered + tcp_packets_in_flight(tp);

		tp->app_limited = limited ? limited : 1;
		if (!bbr->probe_rtt_done_stamp && tcp_packets_in_flight(tp) <= bbr_probe_rtt_cwnd(bbr)) {
			bbr->probe_rtt_done_stamp = now + msecs_to_jiffies(bbr_probe_rtt_mode_ms);
			bbr->probe_rtt_round_done = 0;
			bbr->next_rtt_delivered = tp->delivered;
		} else if (bbr->probe_rtt_done_stamp) {
			if (bbr->round_start)
				bbr->probe_rtt_round_done = 1;
			if (bbr->probe_rtt_round_done)
				bbr_check_probe_rtt_done(sk, bbr);
		}
	}
	if (rs->delivered > 0)
		bbr->idle_restart = 0;
}

static __always_inline void bbr_update_gains(struct bbr3 *bbr)
{
	switch (bbr->mode) {
	case BBR3_STARTUP:
		bbr->pacing_gain = bbr_startup_pacing_gain;
		bbr->cwnd_gain = bbr_startup_cwnd_gain;
		break;
	case BBR3_DRAIN:
		bbr->pacing_gain = bbr_drain_gain;
		bbr->cwnd_gain = bbr_startup_cwnd_gain;
		break;
	case BBR3_PROBE_BW:
		bbr->pacing_gain = bbr->cycle_idx == BW_PROBE_UP ? gain_up
				 : bbr->cycle_idx == BW_PROBE_DOWN ? gain_down : BBR_UNIT;
		bbr->cwnd_gain = bbr_cwnd_gain;
		if (bbr->cycle_idx == BW_PROBE_UP)
			bbr->cwnd_gain += BBR_UNIT * bbr_bw_probe_cwnd_gain / 4;
		break;
	default: /* PROBE_RTT */
		bbr->pacing_gain = BBR_UNIT;
		bbr->cwnd_gain = BBR_UNIT;
		break;
	}
}

/* --- cwnd (tcp_bbr.c v3) ----------------------------------------------------- */
static __always_inline void bbr_set_cwnd(struct sock *sk, struct bbr3 *bbr, __u32 acked, __u32 bw, __u32 gain)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd, target_cwnd;

	if (!acked)
		goto done;
	target_cwnd = bbr_bdp(bbr, bw, gain);
	target_cwnd += bbr_ack_aggregation_cwnd(bbr);
	target_cwnd = bbr_quantization_budget(sk, bbr, target_cwnd);

	bbr->try_fast_path = 0;
	if (bbr->full_bw_reached) {
		cwnd += acked;
		if (cwnd >= target_cwnd) {
			cwnd = target_cwnd;
			bbr->try_fast_path = 1;
		}
	} else if (cwnd < target_cwnd || cwnd < 2 * bbr->init_cwnd) {
		cwnd += acked;
	} else {
		bbr->try_fast_path = 1;
	}
	cwnd = max_u32(cwnd, bbr_cwnd_min_target);
done:
	tp->snd_cwnd = min_u32(cwnd, tp->snd_cwnd_clamp);
	if (bbr->mode == BBR3_PROBE_RTT)
		tp->snd_cwnd = min_u32(tp->snd_cwnd, bbr_probe_rtt_cwnd(bbr));
}

/* bbr_bound_cwnd_for_inflight_model(): inflight_hi while probing, with 15%
 * headroom in CRUISE and PROBE_RTT; inflight_lo always. */
static __always_inline void bbr_bound_cwnd_for_inflight_model(struct sock *sk, struct bbr3 *bbr)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cap = ~0U;

	if (bbr->mode == BBR3_PROBE_BW && bbr->cycle_idx != BW_PROBE_CRUISE)
		cap = bbr->inflight_hi;
	else if (bbr->mode == BBR3_PROBE_RTT || (bbr->mode == BBR3_PROBE_BW && bbr->cycle_idx == BW_PROBE_CRUISE))
		cap = bbr_inflight_with_headroom(bbr);
	cap = min_u32(cap, bbr->inflight_lo);
	cap = max_u32(cap, bbr_cwnd_min_target);
	tp->snd_cwnd = min_u32(cap, tp->snd_cwnd);
}

/* bbr_run_fast_path(): app-limited, no loss (v2alpha: nor ECE), sample below max bw. */
static __always_inline bool bbr_run_fast_path(struct sock *sk, struct bbr3 *bbr, bool *update_model,
					      const struct rate_sample *rs, const struct v3_sample *v3)
{
	__u32 prev_min_rtt_us, prev_mode;

	if (bbr_fast_path && bbr->try_fast_path && rs->is_app_limited && v3->sample_bw < bbr_max_bw(bbr) &&
	    !bbr->loss_in_round && !bbr->ecn_in_round) {
		prev_mode = bbr->mode;
		prev_min_rtt_us = bbr->min_rtt_us;
		bbr_check_drain(sk, bbr);
		bbr_update_cycle_phase(sk, bbr, rs, v3);
		bbr_update_min_rtt(sk, bbr, rs);
		if (bbr->mode == prev_mode && bbr->min_rtt_us == prev_min_rtt_us && bbr->try_fast_path)
			return true;
		*update_model = false;
	}
	return false;
}

/* bbr_note_loss(): this round is a loss round. */
static __always_inline void bbr_note_loss(struct sock *sk, struct bbr3 *bbr)
{
	if (!bbr->loss_in_round)
		bbr->loss_round_delivered = tcp_sk(sk)->delivered;
	bbr->loss_in_round = 1;
	bbr->loss_in_cycle = 1;
}

/* bbr_skb_marked_lost(), run for the `newly_lost` packets this ACK (or an RTO
 * before it) marked, with the ACK's rebuilt sample for their flight. */
static __always_inline void marked_lost(struct sock *sk, struct bbr3 *bbr, const struct v3_sample *ack_v3,
					__u32 newly_lost)
{
	struct v3_sample v3 = *ack_v3;

	bbr_note_loss(sk, bbr);
	if (!bbr->bw_probe_samples || !v3.tx_in_flight)
		return;
	if (bbr_is_inflight_too_high(&v3)) {
		v3.tx_in_flight = bbr_inflight_hi_from_lost_skb(&v3, newly_lost);
		bbr_handle_inflight_too_high(sk, bbr, &v3);
	}
}

static __always_inline __u32 stat_index(const struct bbr3 *bbr)
{
	switch (bbr->mode) {
	case BBR3_STARTUP:
		return 0;
	case BBR3_DRAIN:
		return 1;
	case BBR3_PROBE_BW:
		return bbr->cycle_idx == BW_PROBE_DOWN ? 2 : bbr->cycle_idx == BW_PROBE_CRUISE ? 3
		     : bbr->cycle_idx == BW_PROBE_REFILL ? 4 : 5;
	default:
		return 6;
	}
}
