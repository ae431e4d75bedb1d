// SPDX-License-Identifier: MIT
/* bbr3.bpf.c's estimates.h: Bandwidth, BDP and inflight estimates, and loss signals (tcp_bbr.c v3). */
#pragma once

/* --- Estimates (tcp_bbr.c v3) ---------------------------------------------- */
static __always_inline __u32 bbr_max_bw(const struct bbr3 *bbr)
{
	return max_u32(bbr->bw_hi[0], bbr->bw_hi[1]);
}

static __always_inline __u32 bbr_bw(const struct bbr3 *bbr)
{
	return min_u32(bbr_max_bw(bbr), bbr->bw_lo);
}

static __always_inline __u16 bbr_extra_acked(const struct bbr3 *bbr)
{
	return bbr->extra_acked[0] > bbr->extra_acked[1] ? bbr->extra_acked[0] : bbr->extra_acked[1];
}

/* bbr_rate_bytes_per_sec(): at least 1 byte/s in v3. */
static __always_inline __u64 bbr_rate_bytes_per_sec(struct sock *sk, __u64 rate, __u32 gain, __u32 margin)
{
	rate *= tcp_sk(sk)->mss_cache;
	rate *= gain;
	rate >>= BBR_SCALE;
	rate *= USEC_PER_SEC / 100 * (100 - margin);
	rate >>= BW_SCALE;
	return rate > 1 ? rate : 1;
}

static __always_inline __u64 bbr_bw_to_pacing_rate(struct sock *sk, __u32 bw, __u32 gain)
{
	__u64 rate = bbr_rate_bytes_per_sec(sk, bw, gain, bbr_pacing_margin_percent);
	__u64 max_rate = sk->sk_max_pacing_rate;

	return rate < max_rate ? rate : max_rate;
}

static __always_inline void bbr_init_pacing_rate_from_rtt(struct sock *sk, struct bbr3 *bbr)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 rtt_us;
	__u64 bw;

	if (tp->srtt_us) {
		rtt_us = max_u32(tp->srtt_us >> 3, 1);
		bbr->has_seen_rtt = 1;
	} else {
		rtt_us = USEC_PER_MSEC;
	}
	bw = (__u64)tp->snd_cwnd * BW_UNIT;
	bw /= rtt_us;
	sk->sk_pacing_rate = bbr_bw_to_pacing_rate(sk, (__u32)bw, bbr_startup_pacing_gain);
}

static __always_inline void bbr_set_pacing_rate(struct sock *sk, struct bbr3 *bbr, __u32 bw, __u32 gain)
{
	__u64 rate = bbr_bw_to_pacing_rate(sk, bw, gain);

	if (!bbr->has_seen_rtt && tcp_sk(sk)->srtt_us)
		bbr_init_pacing_rate_from_rtt(sk, bbr);
	if (bbr->full_bw_reached || rate > sk->sk_pacing_rate)
		sk->sk_pacing_rate = rate;
}

/* tcp_bbr2.c bbr_min_tso_segs(): one segment per skb below bbr_min_tso_rate. */
static __always_inline __u32 bbr_min_tso_segs(struct sock *sk)
{
	return sk->sk_pacing_rate < (bbr_min_tso_rate >> 3) ? 1 : 2;
}

/* bbr_tso_segs_goal() (bbr_tso_segs_generic with GSO_LEGACY_MAX_SIZE; v2alpha's
 * GSO_MAX_SIZE was the same 64 KB):
 * pacing_rate >> pacing_shift, plus 64 KB halved per 512 us of min_rtt. */
static __always_inline __u32 bbr_tso_segs_goal(struct sock *sk, const struct bbr3 *bbr)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 bytes = sk->sk_pacing_rate >> sk->sk_pacing_shift;
	__u32 r = bbr->min_rtt_us >> bbr_tso_rtt_shift;
	__u32 segs, min_segs;

	if (r < 32)
		bytes += GSO_LEGACY_MAX_SIZE >> r;
	if (bytes > GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER)
		bytes = GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER;
	segs = (__u32)bytes / tp->mss_cache;
	if (bbr_v2alpha)
		min_segs = bbr_min_tso_segs(sk);
	else
		min_segs = sk->__sk_common.skc_net.net->ipv4.sysctl_tcp_min_tso_segs;
	return max_u32(segs, min_segs);
}

static __always_inline void bbr_save_cwnd(struct sock *sk, struct bbr3 *bbr)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (bbr->prev_ca_state < TCP_CA_Recovery && bbr->mode != BBR3_PROBE_RTT)
		bbr->prior_cwnd = tp->snd_cwnd;
	else
		bbr->prior_cwnd = max_u32(bbr->prior_cwnd, tp->snd_cwnd);
}

/* bbr_bdp(): ceil(bw x min_rtt x gain); init_cwnd before any RTT sample. */
static __always_inline __u32 bbr_bdp(const struct bbr3 *bbr, __u32 bw, __u32 gain)
{
	__u64 w;

	if (bbr->min_rtt_us == ~0U)
		return bbr->init_cwnd;
	w = (__u64)bw * bbr->min_rtt_us;
	return (__u32)((((w * gain) >> BBR_SCALE) + BW_UNIT - 1) / BW_UNIT);
}

/* bbr_quantization_budget() (v3): at least 3 TSO skbs and 4 packets, +2 in UP. */
static __always_inline __u32 bbr_quantization_budget(struct sock *sk, const struct bbr3 *bbr, __u32 cwnd)
{
	cwnd = max_u32(cwnd, 3 * bbr_tso_segs_goal(sk, bbr));
	cwnd = max_u32(cwnd, bbr_cwnd_min_target);
	if (bbr->mode == BBR3_PROBE_BW && bbr->cycle_idx == BW_PROBE_UP)
		cwnd += 2;
	return cwnd;
}

static __always_inline __u32 bbr_inflight(struct sock *sk, const struct bbr3 *bbr, __u32 bw, __u32 gain)
{
	return bbr_quantization_budget(sk, bbr, bbr_bdp(bbr, bw, gain));
}

static __always_inline __u32 bbr_packets_in_net_at_edt(struct sock *sk, const struct bbr3 *bbr, __u32 inflight_now)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 now_ns = tp->tcp_clock_cache;
	__u64 edt_ns = tp->tcp_wstamp_ns > now_ns ? tp->tcp_wstamp_ns : now_ns;
	__u64 interval_us = (edt_ns - now_ns) / NSEC_PER_USEC;
	__u32 interval_delivered = (__u32)(((__u64)bbr_bw(bbr) * interval_us) >> BW_SCALE);
	__u32 inflight_at_edt = inflight_now;

	if (bbr->pacing_gain > BBR_UNIT)
		inflight_at_edt += bbr_tso_segs_goal(sk, bbr);
	if (interval_delivered >= inflight_at_edt)
		return 0;
	return inflight_at_edt - interval_delivered;
}

/* bbr_ack_aggregation_cwnd() (v3: also before the pipe is full). */
static __always_inline __u32 bbr_ack_aggregation_cwnd(const struct bbr3 *bbr)
{
	__u32 max_aggr_cwnd = (__u32)(((__u64)bbr_bw(bbr) * bbr_extra_acked_max_us) / BW_UNIT);
	__u32 aggr_cwnd = (bbr_extra_acked_gain * bbr_extra_acked(bbr)) >> BBR_SCALE;

	return min_u32(aggr_cwnd, max_aggr_cwnd);
}

static __always_inline __u32 bbr_probe_rtt_cwnd(const struct bbr3 *bbr)
{
	return max_u32(bbr_cwnd_min_target, bbr_bdp(bbr, bbr_bw(bbr), bbr_probe_rtt_cwnd_gain));
}

/* bbr_target_inflight(): our BDP, unless congestion cut cwnd. */
static __always_inline __u32 bbr_target_inflight(struct sock *sk, const struct bbr3 *bbr)
{
	return min_u32(bbr_inflight(sk, bbr, bbr_bw(bbr), BBR_UNIT), tcp_sk(sk)->snd_cwnd);
}

static __always_inline bool bbr_is_probing_bandwidth(const struct bbr3 *bbr)
{
	return bbr->mode == BBR3_STARTUP ||
	       (bbr->mode == BBR3_PROBE_BW &&
		(bbr->cycle_idx == BW_PROBE_REFILL || bbr->cycle_idx == BW_PROBE_UP));
}

static __always_inline bool bbr_has_elapsed_in_phase(struct sock *sk, const struct bbr3 *bbr, __u32 interval_us)
{
	return tcp_stamp_us_delta(tcp_sk(sk)->tcp_mstamp, bbr->cycle_mstamp + interval_us) > 0;
}

/* --- Loss signals (tcp_bbr.c v3) ------------------------------------------- */
/* bbr_is_inflight_too_high(): loss above 2% of what was in flight (the ECN
 * half needs ecn_eligible, never set here). */
static __always_inline bool bbr_is_inflight_too_high(const struct v3_sample *v3)
{
	if (v3->lost > 0 && v3->tx_in_flight) {
		__u32 loss_thresh = (__u32)(((__u64)v3->tx_in_flight * bbr_loss_thresh) >> BBR_SCALE);

		if ((__u32)v3->lost > loss_thresh)
			return true;
	}
	return false;
}

/* bbr_inflight_hi_from_lost_skb(): the inflight at which the loss rate
 * crossed loss_thresh, within the lost skb(s) of `pcount` packets. */
static __always_inline __u32 bbr_inflight_hi_from_lost_skb(const struct v3_sample *v3, __u32 pcount)
{
	__s32 inflight_prev = (__s32)v3->tx_in_flight - (__s32)pcount;
	__s32 lost_prev = v3->lost - (__s32)pcount;
	__u64 loss_budget, lost_prefix;

	if (inflight_prev < 0 || lost_prev < 0)
		return ~0U;
	loss_budget = ((__u64)inflight_prev * bbr_loss_thresh + BBR_UNIT - 1) >> BBR_SCALE;
	if ((__u64)lost_prev >= loss_budget) {
		lost_prefix = 0;
	} else {
		lost_prefix = (loss_budget - lost_prev) << BBR_SCALE;
		lost_prefix /= BBR_UNIT - bbr_loss_thresh;
	}
	return (__u32)(inflight_prev + lost_prefix);
}

static __always_inline __u32 bbr_inflight_with_headroom(const struct bbr3 *bbr)
{
	__u32 headroom;
	__s32 v;

	if (bbr->inflight_hi == ~0U)
		return ~0U;
	headroom = max_u32((__u32)(((__u64)bbr->inflight_hi * bbr_inflight_headroom) >> BBR_SCALE), 1);
	v = (__s32)(bbr->inflight_hi - headroom);
	return v > (__s32)bbr_cwnd_min_target ? (__u32)v : bbr_cwnd_min_target;
}

static __always_inline void bbr_reset_full_bw(struct bbr3 *bbr)
{
	bbr->full_bw = 0;
	bbr->full_bw_cnt = 0;
	bbr->full_bw_now = 0;
}

static __always_inline void bbr_reset_lower_bounds(struct bbr3 *bbr)
{
	bbr->bw_lo = ~0U;
	bbr->inflight_lo = ~0U;
}

static __always_inline void bbr_reset_congestion_signals(struct bbr3 *bbr)
{
	bbr->loss_in_round = 0;
	bbr->ecn_in_round = 0;
	bbr->loss_in_cycle = 0;
	bbr->bw_latest = 0;
	bbr->inflight_latest = 0;
}
