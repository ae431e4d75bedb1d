// SPDX-License-Identifier: MIT
/*
 * BBRv1 as a BPF struct_ops congestion control: the algorithm of Linux
 * net/ipv4/tcp_bbr.c (6.x), ported so that the PROBE_BW up-phase gain can be
 * chosen at build time. Everything else (constants, fixed-point arithmetic and
 * its rounding, field widths, order of updates) follows tcp_bbr.c; each piece
 * names the tcp_bbr.c function it stands for. crates/cclab-cc/src/bbr/ is the
 * simulator's port of the same algorithm.
 *
 * Build parameters (python/cclab/engines/kernel/bpf_cc.py sets them):
 *   CCLAB_PROBE_BW_GAIN_PERMILLE  PROBE_BW phase-0 gain x 1000 (Linux: 1250)
 *   CCLAB_CA_NAME                 the CC's name and the struct_ops map's name
 *   CCLAB_HZ                      the kernel's CONFIG_HZ (jiffies per second)
 *   CCLAB_MAX_TCP_HEADER          the kernel's MAX_TCP_HEADER (bytes)
 *
 * Not ported: get_info (INET_DIAG_BBRINFO), which BPF congestion controls
 * cannot provide (net/ipv4/bpf_tcp_ca.c lists it as unsupported).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#ifndef CCLAB_PROBE_BW_GAIN_PERMILLE
#error "define CCLAB_PROBE_BW_GAIN_PERMILLE (e.g. 1250 for Linux's 5/4)"
#endif
#ifndef CCLAB_CA_NAME
#error "define CCLAB_CA_NAME (e.g. cclab_bbr1500)"
#endif
#ifndef CCLAB_HZ
#error "define CCLAB_HZ (the kernel's CONFIG_HZ)"
#endif
#ifndef CCLAB_MAX_TCP_HEADER
#error "define CCLAB_MAX_TCP_HEADER (the kernel's MAX_TCP_HEADER)"
#endif

#define STR2(x) #x
#define STR(x) STR2(x)

char _license[] SEC("license") = "Dual MIT/GPL";

/* --- Units (tcp_bbr.c top of file) ------------------------------------- */
/* Bandwidth in packets per microsecond, shifted left BW_SCALE bits. */
#define BW_SCALE 24
#define BW_UNIT (1ULL << BW_SCALE)
/* Gains are fractions of BBR_UNIT. */
#define BBR_SCALE 8
#define BBR_UNIT (1 << BBR_SCALE)

#define USEC_PER_MSEC 1000ULL
#define USEC_PER_SEC 1000000ULL
#define NSEC_PER_USEC 1000ULL
/* include/net/tcp.h */
#define TCP_INIT_CWND 10
#define TCP_INFINITE_SSTHRESH 0x7fffffff
/* include/linux/netdevice.h: GSO_LEGACY_MAX_SIZE */
#define GSO_LEGACY_MAX_SIZE 65536
/* include/net/tcp.h: flag bit of tcp_congestion_ops.flags; not set (see README) */

/* --- Constants (tcp_bbr.c, file scope) ---------------------------------- */
enum cclab_bbr_mode { /* tcp_bbr.c enum bbr_mode */
	CCLAB_STARTUP,	/* ramp up quickly to fill the pipe */
	CCLAB_DRAIN,	/* drain the queue STARTUP built */
	CCLAB_PROBE_BW,	/* cycle the pacing gain around the estimated bw */
	CCLAB_PROBE_RTT,	/* cut inflight to re-measure min_rtt */
};

/* CYCLE_LEN: phases in the PROBE_BW gain cycle. */
#define CYCLE_LEN 8
/* bbr_bw_rtts: max-bw filter window, in round trips. */
static const __u32 bbr_bw_rtts = CYCLE_LEN + 2;
/* bbr_min_rtt_win_sec: min_rtt filter window. */
static const __u32 bbr_min_rtt_win_sec = 10;
/* bbr_probe_rtt_mode_ms: least time at cwnd_min_target in PROBE_RTT. */
static const __u32 bbr_probe_rtt_mode_ms = 200;
/* bbr_min_tso_rate: below this rate (bit/s) send one segment per skb. */
static const __u64 bbr_min_tso_rate_bps = 1200000;
/* bbr_pacing_margin_percent: pace ~1% below the estimated bw. */
static const __u64 bbr_pacing_margin_percent = 1;
/* bbr_high_gain: 2/ln(2), STARTUP's pacing and cwnd gain. */
static const __u32 bbr_high_gain = BBR_UNIT * 2885 / 1000 + 1;
/* bbr_drain_gain: 1/high_gain, drains STARTUP's queue in about a round. */
static const __u32 bbr_drain_gain = BBR_UNIT * 1000 / 2885;
/* bbr_cwnd_gain: PROBE_BW's cwnd gain (tolerates delayed/stretched ACKs). */
static const __u32 bbr_cwnd_gain = BBR_UNIT * 2;
/* bbr_pacing_gain[0]: the up-phase gain, the one build-time parameter
 * (Linux: BBR_UNIT * 5 / 4). Same truncation as the simulator: floor(g x 256). */
static const __u32 probe_bw_up_gain = BBR_UNIT * CCLAB_PROBE_BW_GAIN_PERMILLE / 1000;
/* bbr_pacing_gain[1]: the down phase, 3/4 as in Linux. */
static const __u32 probe_bw_down_gain = BBR_UNIT * 3 / 4;
/* bbr_cycle_rand: randomize the starting phase over this many phases. */
static const __u32 bbr_cycle_rand = 7;
/* bbr_cwnd_min_target: at least 4 packets in flight. */
static const __u32 bbr_cwnd_min_target = 4;
/* bbr_full_bw_thresh / bbr_full_bw_cnt: the pipe is full after 3 rounds
 * without 25% bw growth. */
static const __u32 bbr_full_bw_thresh = BBR_UNIT * 5 / 4;
static const __u32 bbr_full_bw_cnt = 3;
/* Long-term (policer) sampling: bbr_lt_intvl_min_rtts, bbr_lt_loss_thresh
 * (50/256 ~ 20% loss), bbr_lt_bw_ratio (1/8), bbr_lt_bw_diff (4 kbit/s in
 * bytes/s), bbr_lt_bw_max_rtts. */
static const __u32 bbr_lt_intvl_min_rtts = 4;
static const __u32 bbr_lt_loss_thresh = 50;
static const __u32 bbr_lt_bw_ratio = BBR_UNIT / 8;
static const __u64 bbr_lt_bw_diff_Bps = 4000 / 8;
static const __u32 bbr_lt_bw_max_rtts = 48;
/* ACK aggregation: bbr_extra_acked_gain, bbr_extra_acked_win_rtts,
 * bbr_ack_epoch_acked_reset_thresh, bbr_extra_acked_max_us. */
static const __u32 bbr_extra_acked_gain = BBR_UNIT;
static const __u32 bbr_extra_acked_win_rtts = 5;
static const __u32 bbr_ack_epoch_acked_reset_thresh = 1U << 20;
static const __u64 bbr_extra_acked_max_us = 100 * 1000;

/* include/net/tcp.h: MAX_TCP_HEADER depends on the kernel config (bpf_cc.py). */
#define MAX_TCP_HEADER CCLAB_MAX_TCP_HEADER
#define HZ CCLAB_HZ

/* lib/win_minmax.c: struct minmax_sample / struct minmax (own copy, the
 * vmlinux.h types carry CO-RE attributes meant for kernel memory). */
struct bbr_minmax_sample {
	__u32 t;
	__u32 v;
};

/* struct bbr (tcp_bbr.c; renamed, vmlinux.h has the built-in's): the same fields and bit widths, so that wrapping and
 * saturation behave as in Linux; it lives in icsk_ca_priv (104 bytes). */
struct cclab_bbr {
	__u32 min_rtt_us;		/* min RTT in the min_rtt_win_sec window */
	__u32 min_rtt_stamp;		/* jiffies of min_rtt_us */
	__u32 probe_rtt_done_stamp;	/* end of PROBE_RTT, jiffies */
	struct bbr_minmax_sample bw[3];	/* max recent delivery rate, pkts/us << 24 */
	__u32 rtt_cnt;			/* packet-timed rounds elapsed */
	__u32 next_rtt_delivered;	/* tp->delivered at the end of this round */
	__u64 cycle_mstamp;		/* start of this gain-cycle phase */
	__u32 mode:3,
	      prev_ca_state:3,
	      packet_conservation:1,
	      round_start:1,
	      idle_restart:1,
	      probe_rtt_round_done:1,
	      unused:13,
	      lt_is_sampling:1,
	      lt_rtt_cnt:7,
	      lt_use_bw:1;
	__u32 lt_bw;			/* long-term bw, pkts/us << 24 */
	__u32 lt_last_delivered;
	__u32 lt_last_stamp;		/* ms */
	__u32 lt_last_lost;
	__u32 pacing_gain:10,
	      cwnd_gain:10,
	      full_bw_reached:1,
	      full_bw_cnt:2,
	      cycle_idx:3,
	      has_seen_rtt:1,
	      unused_b:5;
	__u32 prior_cwnd;		/* cwnd before loss recovery or PROBE_RTT */
	__u32 full_bw;			/* bw at the last 25% growth (STARTUP exit) */
	__u64 ack_epoch_mstamp;		/* start of the ACK-aggregation epoch */
	__u16 extra_acked[2];		/* max excess ACKed, two windows */
	__u32 ack_epoch_acked:20,
	      extra_acked_win_rtts:5,
	      extra_acked_win_idx:1,
	      unused_c:6;
};

_Static_assert(sizeof(struct cclab_bbr) <= sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cclab_bbr must fit in icsk_ca_priv");

/* --- Accessors ------------------------------------------------------------ */
/* tcp_sk(), before(), tcp_jiffies32(), msecs_to_jiffies() and the rest of what the kernel's
 * headers give a module: one copy for every port. */
#include "../cclab-bpf-common/cclab_tcp.h"

static __always_inline struct cclab_bbr *bbr_of(const struct sock *sk)
{
	return (struct cclab_bbr *)inet_csk(sk)->icsk_ca_priv;
}

/* --- lib/win_minmax.c: minmax_reset / minmax_running_max ---------------- */
static __always_inline __u32 minmax_reset(struct bbr_minmax_sample *s, __u32 t, __u32 v)
{
	s[0].t = s[1].t = s[2].t = t;
	s[0].v = s[1].v = s[2].v = v;
	return v;
}

/* minmax_subwin_update(): age the three choices as the window slides. */
static __always_inline __u32 minmax_subwin_update(struct bbr_minmax_sample *s, __u32 win,
						  __u32 t, __u32 v)
{
	__u32 dt = t - s[0].t;

	if (dt > win) {
		/* The best left the window: promote; maybe twice. */
		s[0] = s[1];
		s[1] = s[2];
		s[2].t = t;
		s[2].v = v;
		if (t - s[0].t > win) {
			s[0] = s[1];
			s[1] = s[2];
			s[2].t = t;
			s[2].v = v;
		}
	} else if (s[1].t == s[0].t && dt > win / 4) {
		/* A quarter window without a second choice: take this one. */
		s[1].t = s[2].t = t;
		s[1].v = s[2].v = v;
	} else if (s[2].t == s[1].t && dt > win / 2) {
		/* Half a window without a third choice: take this one. */
		s[2].t = t;
		s[2].v = v;
	}
	return s[0].v;
}

static __always_inline __u32 minmax_running_max(struct bbr_minmax_sample *s, __u32 win,
						__u32 t, __u32 v)
{
	/* A new maximum, or nothing left in the window: start afresh. */
	if (v >= s[0].v || t - s[2].t > win)
		return minmax_reset(s, t, v);
	if (v >= s[1].v) {
		s[1].t = s[2].t = t;
		s[1].v = s[2].v = v;
	} else if (v >= s[2].v) {
		s[2].t = t;
		s[2].v = v;
	}
	return minmax_subwin_update(s, win, t, v);
}

/* --- Estimates (tcp_bbr.c) ---------------------------------------------- */
/* bbr_max_bw(): the windowed max delivery rate. */
static __always_inline __u32 bbr_max_bw(const struct cclab_bbr *bbr)
{
	return bbr->bw[0].v;
}

/* bbr_bw(): the bw the model uses: long-term bw while policed. */
static __always_inline __u32 bbr_bw(const struct cclab_bbr *bbr)
{
	return bbr->lt_use_bw ? bbr->lt_bw : bbr_max_bw(bbr);
}

/* bbr_extra_acked(): max excess ACKed over the last 5-10 rounds. */
static __always_inline __u16 bbr_extra_acked(const struct cclab_bbr *bbr)
{
	return bbr->extra_acked[0] > bbr->extra_acked[1] ? bbr->extra_acked[0] : bbr->extra_acked[1];
}

/* bbr_rate_bytes_per_sec(): rate x mss x gain, 1% margin; order avoids u64 overflow. */
static __always_inline __u64 bbr_rate_bytes_per_sec(struct sock *sk, __u64 rate, __u32 gain)
{
	__u32 mss = tcp_sk(sk)->mss_cache;

	rate *= mss;
	rate *= gain;
	rate >>= BBR_SCALE;
	rate *= USEC_PER_SEC / 100 * (100 - bbr_pacing_margin_percent);
	return rate >> BW_SCALE;
}

/* bbr_bw_to_pacing_rate(): capped by SO_MAX_PACING_RATE. */
static __always_inline __u64 bbr_bw_to_pacing_rate(struct sock *sk, __u32 bw, __u32 gain)
{
	__u64 rate = bbr_rate_bytes_per_sec(sk, bw, gain);
	__u64 max_rate = sk->sk_max_pacing_rate;

	return rate < max_rate ? rate : max_rate;
}

/* bbr_init_pacing_rate_from_rtt(): high_gain x cwnd / srtt (1 ms if no sample). */
static __always_inline void bbr_init_pacing_rate_from_rtt(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u64 bw;
	__u32 rtt_us;

	if (tp->srtt_us) {
		rtt_us = tp->srtt_us >> 3;
		if (rtt_us < 1)
			rtt_us = 1;
		bbr->has_seen_rtt = 1;
	} else {
		rtt_us = USEC_PER_MSEC;
	}
	bw = (__u64)tp->snd_cwnd * BW_UNIT;
	bw /= rtt_us;
	sk->sk_pacing_rate = bbr_bw_to_pacing_rate(sk, (__u32)bw, bbr_high_gain);
}

/* bbr_set_pacing_rate(): never slow down before the pipe is full. */
static __always_inline void bbr_set_pacing_rate(struct sock *sk, __u32 bw, __u32 gain)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u64 rate = bbr_bw_to_pacing_rate(sk, bw, gain);

	if (!bbr->has_seen_rtt && tp->srtt_us)
		bbr_init_pacing_rate_from_rtt(sk);
	if (bbr->full_bw_reached || rate > sk->sk_pacing_rate)
		sk->sk_pacing_rate = rate;
}

/* bbr_min_tso_segs(): one segment per skb below bbr_min_tso_rate, else two. */
static __always_inline __u32 bbr_min_tso_segs_of(struct sock *sk)
{
	return sk->sk_pacing_rate < (bbr_min_tso_rate_bps >> 3) ? 1 : 2;
}

/* bbr_tso_segs_goal(): about 1 ms of data (pacing_rate >> pacing_shift) per skb. */
static __always_inline __u32 bbr_tso_segs_goal(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 bytes = sk->sk_pacing_rate >> sk->sk_pacing_shift;
	__u32 segs, min_segs;

	if (bytes > GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER)
		bytes = GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER;
	segs = (__u32)bytes / tp->mss_cache;
	min_segs = bbr_min_tso_segs_of(sk);
	if (segs < min_segs)
		segs = min_segs;
	return segs < 0x7F ? segs : 0x7F;
}

/* bbr_save_cwnd(): remember the last good cwnd before recovery or PROBE_RTT. */
static __always_inline void bbr_save_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);

	if (bbr->prev_ca_state < TCP_CA_Recovery && bbr->mode != CCLAB_PROBE_RTT)
		bbr->prior_cwnd = tp->snd_cwnd;
	else if (tp->snd_cwnd > bbr->prior_cwnd)
		bbr->prior_cwnd = tp->snd_cwnd;
}

/* bbr_bdp(): ceil(bw x min_rtt x gain), TCP_INIT_CWND before any RTT sample. */
static __always_inline __u32 bbr_bdp(const struct cclab_bbr *bbr, __u32 bw, __u32 gain)
{
	__u64 w;

	if (bbr->min_rtt_us == ~0U)
		return TCP_INIT_CWND;
	w = (__u64)bw * bbr->min_rtt_us;
	return (__u32)((((w * gain) >> BBR_SCALE) + BW_UNIT - 1) / BW_UNIT);
}

/* bbr_quantization_budget(): room for 3 TSO skbs, even cwnd, +2 when probing. */
static __always_inline __u32 bbr_quantization_budget(struct sock *sk, __u32 cwnd)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	cwnd += 3 * bbr_tso_segs_goal(sk);
	cwnd = (cwnd + 1) & ~1U;
	if (bbr->mode == CCLAB_PROBE_BW && bbr->cycle_idx == 0)
		cwnd += 2;
	return cwnd;
}

/* bbr_inflight(): bdp plus the quantization budget. */
static __always_inline __u32 bbr_inflight(struct sock *sk, __u32 bw, __u32 gain)
{
	return bbr_quantization_budget(sk, bbr_bdp(bbr_of(sk), bw, gain));
}

/* bbr_packets_in_net_at_edt(): inflight at the next skb's departure time. */
static __always_inline __u32 bbr_packets_in_net_at_edt(struct sock *sk, __u32 inflight_now)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u64 now_ns = tp->tcp_clock_cache;
	__u64 edt_ns = tp->tcp_wstamp_ns > now_ns ? tp->tcp_wstamp_ns : now_ns;
	__u64 interval_us = (edt_ns - now_ns) / NSEC_PER_USEC;
	__u32 interval_delivered = (__u32)(((__u64)bbr_bw(bbr) * interval_us) >> BW_SCALE);
	__u32 inflight_at_edt = inflight_now;

	if (bbr->pacing_gain > BBR_UNIT)
		inflight_at_edt += bbr_tso_segs_goal(sk);
	if (interval_delivered >= inflight_at_edt)
		return 0;
	return inflight_at_edt - interval_delivered;
}

/* bbr_ack_aggregation_cwnd(): extra cwnd for ACK aggregation once the pipe is full. */
static __always_inline __u32 bbr_ack_aggregation_cwnd(const struct cclab_bbr *bbr)
{
	__u32 max_aggr_cwnd, aggr_cwnd = 0;

	if (bbr_extra_acked_gain && bbr->full_bw_reached) {
		max_aggr_cwnd = (__u32)(((__u64)bbr_bw(bbr) * bbr_extra_acked_max_us) / BW_UNIT);
		aggr_cwnd = (bbr_extra_acked_gain * bbr_extra_acked(bbr)) >> BBR_SCALE;
		if (aggr_cwnd > max_aggr_cwnd)
			aggr_cwnd = max_aggr_cwnd;
	}
	return aggr_cwnd;
}

/* --- Modes (tcp_bbr.c) --------------------------------------------------- */
/* bbr_advance_cycle_phase() */
static __always_inline void bbr_advance_cycle_phase(struct sock *sk)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	bbr->cycle_idx = (bbr->cycle_idx + 1) & (CYCLE_LEN - 1);
	bbr->cycle_mstamp = tcp_sk(sk)->delivered_mstamp;
}

/* bbr_reset_probe_bw_mode(): enter PROBE_BW at a random phase (never phase 1). */
static __always_inline void bbr_reset_probe_bw_mode(struct sock *sk)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	bbr->mode = CCLAB_PROBE_BW;
	bbr->cycle_idx = CYCLE_LEN - 1 - random_below(bbr_cycle_rand);
	bbr_advance_cycle_phase(sk);
}

/* bbr_reset_mode(): STARTUP if the pipe was never full, else PROBE_BW. */
static __always_inline void bbr_reset_mode(struct sock *sk)
{
	if (!bbr_of(sk)->full_bw_reached)
		bbr_of(sk)->mode = CCLAB_STARTUP;
	else
		bbr_reset_probe_bw_mode(sk);
}

/* bbr_check_probe_rtt_done(): leave PROBE_RTT once its deadline passed. */
static __always_inline void bbr_check_probe_rtt_done(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u32 now = tcp_jiffies32();

	if (!(bbr->probe_rtt_done_stamp && after(now, bbr->probe_rtt_done_stamp)))
		return;
	bbr->min_rtt_stamp = now;
	if (bbr->prior_cwnd > tp->snd_cwnd)
		tp->snd_cwnd = bbr->prior_cwnd;
	bbr_reset_mode(sk);
}

/* --- Long-term (policer) bw sampling (tcp_bbr.c) ------------------------- */
/* bbr_reset_lt_bw_sampling_interval() */
static __always_inline void bbr_reset_lt_bw_sampling_interval(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);

	bbr->lt_last_stamp = (__u32)(tp->delivered_mstamp / USEC_PER_MSEC);
	bbr->lt_last_delivered = tp->delivered;
	bbr->lt_last_lost = tp->lost;
	bbr->lt_rtt_cnt = 0;
}

/* bbr_reset_lt_bw_sampling() */
static __always_inline void bbr_reset_lt_bw_sampling(struct sock *sk)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	bbr->lt_bw = 0;
	bbr->lt_use_bw = 0;
	bbr->lt_is_sampling = 0;
	bbr_reset_lt_bw_sampling_interval(sk);
}

/* bbr_lt_bw_interval_done(): two consistent lossy intervals mean a policer. */
static __always_inline void bbr_lt_bw_interval_done(struct sock *sk, __u32 bw)
{
	struct cclab_bbr *bbr = bbr_of(sk);
	__u32 diff;

	if (bbr->lt_bw) {
		diff = bw > bbr->lt_bw ? bw - bbr->lt_bw : bbr->lt_bw - bw;
		/* u32 products, as in Linux */
		if ((__u32)(diff * BBR_UNIT) <= (__u32)(bbr_lt_bw_ratio * bbr->lt_bw) ||
		    bbr_rate_bytes_per_sec(sk, diff, BBR_UNIT) <= bbr_lt_bw_diff_Bps) {
			bbr->lt_bw = (bw + bbr->lt_bw) >> 1;
			bbr->lt_use_bw = 1;
			bbr->pacing_gain = BBR_UNIT;
			bbr->lt_rtt_cnt = 0;
			return;
		}
	}
	bbr->lt_bw = bw;
	bbr_reset_lt_bw_sampling_interval(sk);
}

/* bbr_lt_bw_sampling(): the rate sample's losses and app-limited flag are
 * passed as values so that bbr_set_state() can call it with a made-up sample. */
static __always_inline void bbr_lt_bw_sampling(struct sock *sk, int losses, bool is_app_limited)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u32 lost, delivered, t;
	__u64 bw;

	if (bbr->lt_use_bw) {
		if (bbr->mode == CCLAB_PROBE_BW && bbr->round_start &&
		    ++bbr->lt_rtt_cnt >= bbr_lt_bw_max_rtts) {
			bbr_reset_lt_bw_sampling(sk);
			bbr_reset_probe_bw_mode(sk);
		}
		return;
	}
	/* Start sampling at the first loss, when a policer's tokens are gone. */
	if (!bbr->lt_is_sampling) {
		if (!losses)
			return;
		bbr_reset_lt_bw_sampling_interval(sk);
		bbr->lt_is_sampling = 1;
	}
	if (is_app_limited) {
		bbr_reset_lt_bw_sampling(sk);
		return;
	}
	if (bbr->round_start)
		bbr->lt_rtt_cnt++;
	if (bbr->lt_rtt_cnt < bbr_lt_intvl_min_rtts)
		return;
	if (bbr->lt_rtt_cnt > 4 * bbr_lt_intvl_min_rtts) {
		bbr_reset_lt_bw_sampling(sk);
		return;
	}
	/* End the interval at a loss. */
	if (!losses)
		return;
	lost = tp->lost - bbr->lt_last_lost;
	delivered = tp->delivered - bbr->lt_last_delivered;
	if (!delivered || (__u32)(lost << BBR_SCALE) < (__u32)(bbr_lt_loss_thresh * delivered))
		return;
	t = (__u32)(tp->delivered_mstamp / USEC_PER_MSEC) - bbr->lt_last_stamp;
	if ((__s32)t < 1)
		return;
	if (t >= ~0U / USEC_PER_MSEC) {
		bbr_reset_lt_bw_sampling(sk);
		return;
	}
	t *= USEC_PER_MSEC;
	bw = (__u64)delivered * BW_UNIT;
	bw /= t;
	bbr_lt_bw_interval_done(sk, (__u32)bw);
}

/* --- The model (tcp_bbr.c bbr_update_model and its parts) --------------- */
/* bbr_update_bw(): round counting and the max-bw filter. */
static __always_inline void bbr_update_bw(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__s32 rs_delivered = rs->delivered;
	long interval_us = rs->interval_us;
	__u64 bw;

	bbr->round_start = 0;
	if (rs_delivered < 0 || interval_us <= 0)
		return;
	if (!before(rs->prior_delivered, bbr->next_rtt_delivered)) {
		bbr->next_rtt_delivered = tp->delivered;
		bbr->rtt_cnt++;
		bbr->round_start = 1;
		bbr->packet_conservation = 0;
	}
	bbr_lt_bw_sampling(sk, rs->losses, rs->is_app_limited);

	bw = (__u64)rs_delivered * BW_UNIT;
	bw /= (__u32)interval_us; /* do_div: 32-bit divisor */
	/* App-limited samples count only if they do not lower the estimate. */
	if (!rs->is_app_limited || bw >= bbr_max_bw(bbr))
		minmax_running_max(bbr->bw, bbr_bw_rtts, bbr->rtt_cnt, (__u32)bw);
}

/* extra_acked[extra_acked_win_idx], read and written with constant indexes:
 * the verifier refuses a variable offset into the socket. */
static __always_inline __u16 current_extra_acked(const struct cclab_bbr *bbr)
{
	return bbr->extra_acked_win_idx ? bbr->extra_acked[1] : bbr->extra_acked[0];
}

static __always_inline void set_extra_acked(struct cclab_bbr *bbr, __u16 v)
{
	if (bbr->extra_acked_win_idx)
		bbr->extra_acked[1] = v;
	else
		bbr->extra_acked[0] = v;
}

/* bbr_update_ack_aggregation(): windowed max of data ACKed beyond bw x time. */
static __always_inline void bbr_update_ack_aggregation(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u32 epoch_us, expected_acked, extra_acked, acked_sacked = rs->acked_sacked;
	__u32 epoch_acked;

	if (!bbr_extra_acked_gain || acked_sacked <= 0 || rs->delivered < 0 || rs->interval_us <= 0)
		return;
	if (bbr->round_start) {
		__u32 rtts = bbr->extra_acked_win_rtts + 1;

		bbr->extra_acked_win_rtts = rtts < 0x1F ? rtts : 0x1F;
		if (bbr->extra_acked_win_rtts >= bbr_extra_acked_win_rtts) {
			bbr->extra_acked_win_rtts = 0;
			bbr->extra_acked_win_idx = bbr->extra_acked_win_idx ? 0 : 1;
			set_extra_acked(bbr, 0);
		}
	}
	epoch_us = tcp_stamp_us_delta(tp->delivered_mstamp, bbr->ack_epoch_mstamp);
	expected_acked = (__u32)(((__u64)bbr_bw(bbr) * epoch_us) / BW_UNIT);
	/* Restart the epoch when ACKs come slower than expected, or after many. */
	if (bbr->ack_epoch_acked <= expected_acked ||
	    bbr->ack_epoch_acked + acked_sacked >= bbr_ack_epoch_acked_reset_thresh) {
		bbr->ack_epoch_acked = 0;
		bbr->ack_epoch_mstamp = tp->delivered_mstamp;
		expected_acked = 0;
	}
	epoch_acked = bbr->ack_epoch_acked + acked_sacked;
	bbr->ack_epoch_acked = epoch_acked < 0xFFFFF ? epoch_acked : 0xFFFFF;
	extra_acked = bbr->ack_epoch_acked - expected_acked;
	if (extra_acked > tp->snd_cwnd)
		extra_acked = tp->snd_cwnd;
	if (extra_acked > current_extra_acked(bbr))
		set_extra_acked(bbr, (__u16)extra_acked);
}

/* bbr_is_next_cycle_phase(): time (min_rtt) and inflight decide phase ends. */
static __always_inline bool bbr_is_next_cycle_phase(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	bool is_full_length = tcp_stamp_us_delta(tp->delivered_mstamp, bbr->cycle_mstamp) > bbr->min_rtt_us;
	__u32 inflight, bw;

	if (bbr->pacing_gain == BBR_UNIT)
		return is_full_length;
	inflight = bbr_packets_in_net_at_edt(sk, rs->prior_in_flight);
	bw = bbr_max_bw(bbr);
	/* Up phase: until gain x BDP is in flight, but not past a loss. */
	if (bbr->pacing_gain > BBR_UNIT)
		return is_full_length && (rs->losses || inflight >= bbr_inflight(sk, bw, bbr->pacing_gain));
	/* Down phase: until the queue is drained (inflight at BDP). */
	return is_full_length || inflight <= bbr_inflight(sk, bw, BBR_UNIT);
}

/* bbr_update_cycle_phase() */
static __always_inline void bbr_update_cycle_phase(struct sock *sk, const struct rate_sample *rs)
{
	if (bbr_of(sk)->mode == CCLAB_PROBE_BW && bbr_is_next_cycle_phase(sk, rs))
		bbr_advance_cycle_phase(sk);
}

/* bbr_check_full_bw_reached(): 3 non-app-limited rounds without 25% growth. */
static __always_inline void bbr_check_full_bw_reached(struct sock *sk, const struct rate_sample *rs)
{
	struct cclab_bbr *bbr = bbr_of(sk);
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

/* bbr_check_drain(): STARTUP -> DRAIN -> PROBE_BW. */
static __always_inline void bbr_check_drain(struct sock *sk, const struct rate_sample *rs)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	if (bbr->mode == CCLAB_STARTUP && bbr->full_bw_reached) {
		bbr->mode = CCLAB_DRAIN;
		tcp_sk(sk)->snd_ssthresh = bbr_inflight(sk, bbr_max_bw(bbr), BBR_UNIT);
	}
	if (bbr->mode == CCLAB_DRAIN &&
	    bbr_packets_in_net_at_edt(sk, tcp_packets_in_flight(tcp_sk(sk))) <=
		    bbr_inflight(sk, bbr_max_bw(bbr), BBR_UNIT))
		bbr_reset_probe_bw_mode(sk);
}

/* bbr_update_min_rtt(): 10 s min_rtt filter and the PROBE_RTT mode. */
static __always_inline void bbr_update_min_rtt(struct sock *sk, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u32 now = tcp_jiffies32();
	long rtt_us = rs->rtt_us;
	bool filter_expired = after(now, bbr->min_rtt_stamp + bbr_min_rtt_win_sec * HZ);

	/* Strictly lower, as mainline tcp_bbr.c has it since 5.10 (earlier kernels had <=): equal
	 * samples, such as the ms-granular RTTs of retransmissions, must not put PROBE_RTT off
	 * for ever. `cclab cc compare` against the simulator's BBR found the port's <=. */
	if (rtt_us >= 0 && (rtt_us < (long)bbr->min_rtt_us || (filter_expired && !rs->is_ack_delayed))) {
		bbr->min_rtt_us = (__u32)rtt_us;
		bbr->min_rtt_stamp = now;
	}
	if (bbr_probe_rtt_mode_ms > 0 && filter_expired && !bbr->idle_restart && bbr->mode != CCLAB_PROBE_RTT) {
		bbr->mode = CCLAB_PROBE_RTT;
		bbr_save_cwnd(sk);
		bbr->probe_rtt_done_stamp = 0;
	}
	if (bbr->mode == CCLAB_PROBE_RTT) {
		/* Mark the flow app-limited so low-rate samples are ignored. */
		__u32 limited = tp->delivered + tcp_packets_in_flight(tp);

		tp->app_limited = limited ? limited : 1;
		/* Hold min inflight for max(200 ms, one round). */
		if (!bbr->probe_rtt_done_stamp && tcp_packets_in_flight(tp) <= bbr_cwnd_min_target) {
			bbr->probe_rtt_done_stamp = now + msecs_to_jiffies(bbr_probe_rtt_mode_ms);
			bbr->probe_rtt_round_done = 0;
			bbr->next_rtt_delivered = tp->delivered;
		} else if (bbr->probe_rtt_done_stamp) {
			if (bbr->round_start)
				bbr->probe_rtt_round_done = 1;
			if (bbr->probe_rtt_round_done)
				bbr_check_probe_rtt_done(sk);
		}
	}
	if (rs->delivered > 0)
		bbr->idle_restart = 0;
}

/* bbr_update_gains(): the mode's pacing and cwnd gains. */
static __always_inline void bbr_update_gains(struct sock *sk)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	switch (bbr->mode) {
	case CCLAB_STARTUP:
		bbr->pacing_gain = bbr_high_gain;
		bbr->cwnd_gain = bbr_high_gain;
		break;
	case CCLAB_DRAIN:
		bbr->pacing_gain = bbr_drain_gain;
		bbr->cwnd_gain = bbr_high_gain;
		break;
	case CCLAB_PROBE_BW:
		if (bbr->lt_use_bw)
			bbr->pacing_gain = BBR_UNIT;
		else if (bbr->cycle_idx == 0)
			bbr->pacing_gain = probe_bw_up_gain;
		else if (bbr->cycle_idx == 1)
			bbr->pacing_gain = probe_bw_down_gain;
		else
			bbr->pacing_gain = BBR_UNIT;
		bbr->cwnd_gain = bbr_cwnd_gain;
		break;
	case CCLAB_PROBE_RTT:
		bbr->pacing_gain = BBR_UNIT;
		bbr->cwnd_gain = BBR_UNIT;
		break;
	}
}

/* --- cwnd (tcp_bbr.c) ---------------------------------------------------- */
/* bbr_set_cwnd_to_recover_or_restore(): packet conservation in the first
 * round of recovery, restore the saved cwnd when it ends. */
static __always_inline bool bbr_set_cwnd_to_recover_or_restore(struct sock *sk, const struct rate_sample *rs,
							       __u32 acked, __u32 *new_cwnd)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u8 prev_state = bbr->prev_ca_state;
	__u8 state = inet_csk(sk)->icsk_ca_state;
	__u32 cwnd = tp->snd_cwnd;
	int losses = rs->losses;

	if (losses > 0) {
		__s32 c = (__s32)(cwnd - losses);

		cwnd = c > 1 ? (__u32)c : 1;
	}
	if (state == TCP_CA_Recovery && prev_state != TCP_CA_Recovery) {
		bbr->packet_conservation = 1;
		bbr->next_rtt_delivered = tp->delivered;
		cwnd = tcp_packets_in_flight(tp) + acked;
	} else if (prev_state >= TCP_CA_Recovery && state < TCP_CA_Recovery) {
		if (bbr->prior_cwnd > cwnd)
			cwnd = bbr->prior_cwnd;
		bbr->packet_conservation = 0;
	}
	bbr->prev_ca_state = state;

	if (bbr->packet_conservation) {
		__u32 floor = tcp_packets_in_flight(tp) + acked;

		*new_cwnd = cwnd > floor ? cwnd : floor;
		return true;
	}
	*new_cwnd = cwnd;
	return false;
}

/* bbr_set_cwnd(): slow-start toward the target, or snap down to it. */
static __always_inline void bbr_set_cwnd(struct sock *sk, const struct rate_sample *rs, __u32 acked,
					 __u32 bw, __u32 gain)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);
	__u32 cwnd = tp->snd_cwnd, target_cwnd;

	if (!acked)
		goto done;
	if (bbr_set_cwnd_to_recover_or_restore(sk, rs, acked, &cwnd))
		goto done;

	target_cwnd = bbr_bdp(bbr, bw, gain);
	target_cwnd += bbr_ack_aggregation_cwnd(bbr);
	target_cwnd = bbr_quantization_budget(sk, target_cwnd);

	if (bbr->full_bw_reached)
		cwnd = cwnd + acked < target_cwnd ? cwnd + acked : target_cwnd;
	else if (cwnd < target_cwnd || tp->delivered < TCP_INIT_CWND)
		cwnd = cwnd + acked;
	if (cwnd < bbr_cwnd_min_target)
		cwnd = bbr_cwnd_min_target;
done:
	tp->snd_cwnd = cwnd < tp->snd_cwnd_clamp ? cwnd : tp->snd_cwnd_clamp;
	if (bbr->mode == CCLAB_PROBE_RTT && tp->snd_cwnd > bbr_cwnd_min_target)
		tp->snd_cwnd = bbr_cwnd_min_target;
}

/* --- tcp_congestion_ops (tcp_bbr.c tcp_bbr_cong_ops) --------------------- */
/* bbr_main(): update the model, then pacing rate and cwnd. */
SEC("struct_ops")
void BPF_PROG(cclab_bbr_main, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct cclab_bbr *bbr = bbr_of(sk);
	__u32 bw;

	bbr_update_bw(sk, rs);
	bbr_update_ack_aggregation(sk, rs);
	bbr_update_cycle_phase(sk, rs);
	bbr_check_full_bw_reached(sk, rs);
	bbr_check_drain(sk, rs);
	bbr_update_min_rtt(sk, rs);
	bbr_update_gains(sk);

	bw = bbr_bw(bbr);
	bbr_set_pacing_rate(sk, bw, bbr->pacing_gain);
	bbr_set_cwnd(sk, rs, rs->acked_sacked, bw, bbr->cwnd_gain);
}

/* bbr_init() */
SEC("struct_ops")
void BPF_PROG(cclab_bbr_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);

	bbr->prior_cwnd = 0;
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	bbr->rtt_cnt = 0;
	bbr->next_rtt_delivered = 0;
	bbr->prev_ca_state = TCP_CA_Open;
	bbr->packet_conservation = 0;

	bbr->probe_rtt_done_stamp = 0;
	bbr->probe_rtt_round_done = 0;
	bbr->min_rtt_us = tcp_min_rtt(tp);
	bbr->min_rtt_stamp = tcp_jiffies32();

	minmax_reset(bbr->bw, bbr->rtt_cnt, 0);

	bbr->has_seen_rtt = 0;
	bbr_init_pacing_rate_from_rtt(sk);

	bbr->round_start = 0;
	bbr->idle_restart = 0;
	bbr->full_bw_reached = 0;
	bbr->full_bw = 0;
	bbr->full_bw_cnt = 0;
	bbr->cycle_mstamp = 0;
	bbr->cycle_idx = 0;
	bbr_reset_lt_bw_sampling(sk);
	bbr->mode = CCLAB_STARTUP;

	bbr->ack_epoch_mstamp = tp->tcp_mstamp;
	bbr->ack_epoch_acked = 0;
	bbr->extra_acked_win_rtts = 0;
	bbr->extra_acked_win_idx = 0;
	bbr->extra_acked[0] = 0;
	bbr->extra_acked[1] = 0;

	/* Linux: cmpxchg(NONE -> NEEDED); asks TCP for internal pacing without fq. */
	if (sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
}

/* bbr_sndbuf_expand(): 3 x cwnd, since BBR may slow-start during recovery. */
SEC("struct_ops")
__u32 BPF_PROG(cclab_bbr_sndbuf_expand, struct sock *sk)
{
	return 3;
}

/* bbr_undo_cwnd(): a spurious slow-down; restart full-pipe and policer detection. */
SEC("struct_ops")
__u32 BPF_PROG(cclab_bbr_undo_cwnd, struct sock *sk)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	bbr->full_bw = 0;
	bbr->full_bw_cnt = 0;
	bbr_reset_lt_bw_sampling(sk);
	return tcp_sk(sk)->snd_cwnd;
}

/* bbr_cwnd_event(): restarting from idle, pace at the estimated bw. */
SEC("struct_ops")
void BPF_PROG(cclab_bbr_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cclab_bbr *bbr = bbr_of(sk);

	if (event == CA_EVENT_TX_START && tp->app_limited) {
		bbr->idle_restart = 1;
		bbr->ack_epoch_mstamp = tp->tcp_mstamp;
		bbr->ack_epoch_acked = 0;
		if (bbr->mode == CCLAB_PROBE_BW)
			bbr_set_pacing_rate(sk, bbr_bw(bbr), BBR_UNIT);
		else if (bbr->mode == CCLAB_PROBE_RTT)
			bbr_check_probe_rtt_done(sk);
	}
}

/* bbr_ssthresh(): entering recovery; save cwnd, keep ssthresh. */
SEC("struct_ops")
__u32 BPF_PROG(cclab_bbr_ssthresh, struct sock *sk)
{
	bbr_save_cwnd(sk);
	return tcp_sk(sk)->snd_ssthresh;
}

/* bbr_min_tso_segs() */
SEC("struct_ops")
__u32 BPF_PROG(cclab_bbr_min_tso_segs, struct sock *sk)
{
	return bbr_min_tso_segs_of(sk);
}

/* bbr_set_state(): an RTO ends a round and counts as a loss for the policer
 * detector. */
SEC("struct_ops")
void BPF_PROG(cclab_bbr_set_state, struct sock *sk, __u8 new_state)
{
	struct cclab_bbr *bbr = bbr_of(sk);

	if (new_state == TCP_CA_Loss) {
		bbr->prev_ca_state = TCP_CA_Loss;
		bbr->full_bw = 0;
		bbr->round_start = 1;
		bbr_lt_bw_sampling(sk, 1, false);
	}
}

SEC(".struct_ops")
struct tcp_congestion_ops CCLAB_CA_NAME = {
	.init = (void *)cclab_bbr_init,
	.cong_control = (void *)cclab_bbr_main,
	.sndbuf_expand = (void *)cclab_bbr_sndbuf_expand,
	.undo_cwnd = (void *)cclab_bbr_undo_cwnd,
	.cwnd_event = (void *)cclab_bbr_cwnd_event,
	.ssthresh = (void *)cclab_bbr_ssthresh,
	.min_tso_segs = (void *)cclab_bbr_min_tso_segs,
	.set_state = (void *)cclab_bbr_set_state,
	.name = STR(CCLAB_CA_NAME),
};
