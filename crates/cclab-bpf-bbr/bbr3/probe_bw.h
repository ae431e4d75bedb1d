// SPDX-License-Identifier: MIT
/* bbr3.bpf.c's probe_bw.h: PROBE_BW's phases DOWN, CRUISE, REFILL, UP and the inflight_hi upper bound (tcp_bbr.c v3). */
#pragma once

/* --- PROBE_BW phases (tcp_bbr.c v3) ----------------------------------------- */
static __always_inline void bbr_set_cycle_idx(struct bbr3 *bbr, __u32 idx)
{
	bbr->cycle_idx = idx;
	bbr->try_fast_path = 0;
}

/* bbr_pick_probe_wait(): 0-1 rounds, 2-3 s. */
static __always_inline void bbr_pick_probe_wait(struct bbr3 *bbr)
{
	bbr->rounds_since_probe = random_below(bbr_bw_probe_rand_rounds);
	bbr->probe_wait_us = bbr_bw_probe_base_us + random_below(bbr_bw_probe_rand_us);
}

static __always_inline void bbr_raise_inflight_hi_slope(struct sock *sk, struct bbr3 *bbr)
{
	__u32 growth_this_round = 1U << bbr->bw_probe_up_rounds;

	bbr->bw_probe_up_rounds = min_u32(bbr->bw_probe_up_rounds + 1, 30);
	bbr->bw_probe_up_cnt = max_u32(tcp_sk(sk)->snd_cwnd / growth_this_round, 1);
}

static __always_inline void bbr_start_bw_probe_refill(struct sock *sk, struct bbr3 *bbr, __u32 up_rounds)
{
	bbr_reset_lower_bounds(bbr);
	bbr->bw_probe_up_rounds = up_rounds;
	bbr->bw_probe_up_acks = 0;
	bbr->stopped_risky_probe = 0;
	bbr->ack_phase = ACKS_REFILLING;
	bbr->next_rtt_delivered = tcp_sk(sk)->delivered;
	bbr_set_cycle_idx(bbr, BW_PROBE_REFILL);
}

static __always_inline void bbr_start_bw_probe_up(struct sock *sk, struct bbr3 *bbr, const struct v3_sample *v3)
{
	bbr->ack_phase = ACKS_PROBE_STARTING;
	bbr->next_rtt_delivered = tcp_sk(sk)->delivered;
	bbr->cycle_mstamp = tcp_sk(sk)->tcp_mstamp;
	if (!bbr_v2alpha) { /* v3 ends PROBE_UP on a plateau from here */
		bbr_reset_full_bw(bbr);
		bbr->full_bw = v3->sample_bw;
	}
	bbr_set_cycle_idx(bbr, BW_PROBE_UP);
	bbr_raise_inflight_hi_slope(sk, bbr);
}

static __always_inline void bbr_start_bw_probe_down(struct sock *sk, struct bbr3 *bbr)
{
	bbr_reset_congestion_signals(bbr);
	bbr->bw_probe_up_cnt = ~0U;
	bbr_pick_probe_wait(bbr);
	bbr->cycle_mstamp = tcp_sk(sk)->tcp_mstamp;
	bbr->ack_phase = ACKS_PROBE_STOPPING;
	bbr->next_rtt_delivered = tcp_sk(sk)->delivered;
	bbr_set_cycle_idx(bbr, BW_PROBE_DOWN);
}

static __always_inline void bbr_start_bw_probe_cruise(struct bbr3 *bbr)
{
	if (bbr->inflight_lo != ~0U)
		bbr->inflight_lo = min_u32(bbr->inflight_lo, bbr->inflight_hi);
	bbr_set_cycle_idx(bbr, BW_PROBE_CRUISE);
}

/* bbr_handle_inflight_too_high(): cut inflight_hi once per probe, then DOWN. */
static __always_inline void bbr_handle_inflight_too_high(struct sock *sk, struct bbr3 *bbr, const struct v3_sample *v3)
{
	bbr->prev_probe_too_high = 1;
	bbr->bw_probe_samples = 0;
	count(STAT_TOO_HIGH);
	if (!v3->is_app_limited)
		bbr->inflight_hi = max_u32(v3->tx_in_flight,
					   (__u32)(((__u64)bbr_target_inflight(sk, bbr) * (BBR_UNIT - bbr_beta)) >> BBR_SCALE));
	if (bbr->mode == BBR3_PROBE_BW && bbr->cycle_idx == BW_PROBE_UP)
		bbr_start_bw_probe_down(sk, bbr);
}

static __always_inline void bbr_probe_inflight_hi_upward(struct sock *sk, struct bbr3 *bbr, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 delta;

	if (!tp->is_cwnd_limited || tp->snd_cwnd < bbr->inflight_hi) {
		if (bbr_v2alpha)
			bbr->bw_probe_up_acks = 0; /* no unused credit */
		return;
	}
	bbr->bw_probe_up_acks += rs->acked_sacked;
	if (bbr->bw_probe_up_acks >= bbr->bw_probe_up_cnt) {
		delta = bbr->bw_probe_up_acks / bbr->bw_probe_up_cnt;
		bbr->bw_probe_up_acks -= delta * bbr->bw_probe_up_cnt;
		bbr->inflight_hi += delta;
		if (!bbr_v2alpha)
			bbr->try_fast_path = 0;
	}
	if (bbr->round_start)
		bbr_raise_inflight_hi_slope(sk, bbr);
}

static __always_inline void bbr_advance_max_bw_filter(struct bbr3 *bbr)
{
	if (!bbr->bw_hi[1])
		return;
	bbr->bw_hi[0] = bbr->bw_hi[1];
	bbr->bw_hi[1] = 0;
}

/* bbr_adapt_upper_bounds(); true if it decided a state transition. */
static __always_inline bool bbr_adapt_upper_bounds(struct sock *sk, struct bbr3 *bbr, const struct rate_sample *rs,
						   const struct v3_sample *v3)
{
	if (bbr->ack_phase == ACKS_PROBE_STARTING && bbr->round_start)
		bbr->ack_phase = ACKS_PROBE_FEEDBACK;
	if (bbr->ack_phase == ACKS_PROBE_STOPPING && bbr->round_start) {
		bbr->bw_probe_samples = 0;
		bbr->ack_phase = ACKS_INIT;
		if (bbr->mode == BBR3_PROBE_BW && !rs->is_app_limited)
			bbr_advance_max_bw_filter(bbr);
		if (bbr->mode == BBR3_PROBE_BW && bbr->stopped_risky_probe && !bbr->prev_probe_too_high) {
			bbr_start_bw_probe_refill(sk, bbr, 0);
			return true;
		}
	}
	if (bbr_is_inflight_too_high(v3)) {
		if (bbr->bw_probe_samples)
			bbr_handle_inflight_too_high(sk, bbr, v3);
	} else {
		if (bbr->inflight_hi == ~0U)
			return false;
		if (v3->tx_in_flight > bbr->inflight_hi)
			bbr->inflight_hi = v3->tx_in_flight;
		if (bbr->mode == BBR3_PROBE_BW && bbr->cycle_idx == BW_PROBE_UP)
			bbr_probe_inflight_hi_upward(sk, bbr, rs);
	}
	return false;
}

static __always_inline bool bbr_is_reno_coexistence_probe_time(struct sock *sk, const struct bbr3 *bbr)
{
	__u32 rounds = min_u32(bbr_bw_probe_max_rounds, bbr_target_inflight(sk, bbr));

	return bbr->rounds_since_probe >= rounds;
}

/* bbr_check_time_to_probe_bw() (the ECN re-probe needs ecn_eligible). */
static __always_inline bool bbr_check_time_to_probe_bw(struct sock *sk, struct bbr3 *bbr)
{
	if (bbr_has_elapsed_in_phase(sk, bbr, bbr->probe_wait_us) || bbr_is_reno_coexistence_probe_time(sk, bbr)) {
		bbr_start_bw_probe_refill(sk, bbr, 0);
		return true;
	}
	return false;
}

static __always_inline bool bbr_check_time_to_cruise(struct sock *sk, const struct bbr3 *bbr, __u32 inflight, __u32 bw)
{
	if (inflight > bbr_inflight_with_headroom(bbr))
		return false;
	return inflight <= bbr_inflight(sk, bbr, bw, BBR_UNIT);
}

static __always_inline void bbr_update_cycle_phase(struct sock *sk, struct bbr3 *bbr, const struct rate_sample *rs,
						   const struct v3_sample *v3)
{
	struct tcp_sock *tp = tcp_sk(sk);
	bool is_bw_probe_done = false;
	__u32 inflight, bw;

	if (!bbr->full_bw_reached)
		return;
	if (bbr_adapt_upper_bounds(sk, bbr, rs, v3))
		return;
	if (bbr->mode != BBR3_PROBE_BW)
		return;
	inflight = bbr_packets_in_net_at_edt(sk, bbr, rs->prior_in_flight);
	bw = bbr_max_bw(bbr);

	switch (bbr->cycle_idx) {
	case BW_PROBE_CRUISE:
		bbr_check_time_to_probe_bw(sk, bbr);
		break;
	case BW_PROBE_REFILL:
		/* A round of REFILL: samples now reflect it. */
		if (bbr->round_start) {
			bbr->bw_probe_samples = 1;
			bbr_start_bw_probe_up(sk, bbr, v3);
		}
		break;
	case BW_PROBE_UP:
		if (bbr->prev_probe_too_high && inflight >= bbr->inflight_hi) {
			bbr->stopped_risky_probe = 1;
			is_bw_probe_done = true;
		} else if (bbr_v2alpha) {
			/* A queue is building: 1.25 x BDP in flight after a min_rtt. */
			is_bw_probe_done = bbr_has_elapsed_in_phase(sk, bbr, bbr->min_rtt_us) &&
					   inflight >= bbr_inflight(sk, bbr, bw, bbr_bw_probe_pif_gain);
		} else {
			if (tp->is_cwnd_limited && tp->snd_cwnd >= bbr->inflight_hi) {
				bbr_reset_full_bw(bbr);
				bbr->full_bw = v3->sample_bw;
			} else if (bbr->full_bw_now) {
				is_bw_probe_done = true;
			}
		}
		if (is_bw_probe_done) {
			bbr->prev_probe_too_high = 0;
			bbr_start_bw_probe_down(sk, bbr);
		}
		break;
	case BW_PROBE_DOWN:
		if (bbr_check_time_to_probe_bw(sk, bbr))
			return;
		if (bbr_check_time_to_cruise(sk, bbr, inflight, bw))
			bbr_start_bw_probe_cruise(bbr);
		break;
	}
}
