// SPDX-License-Identifier: MIT
/*
 * BBRv3 as a BPF struct_ops congestion control, for kernels without it (mainline
 * has BBRv1 only). The algorithm is google/bbr branch v3, net/ipv4/tcp_bbr.c
 * (BBR_VERSION 3); every function below names the tcp_bbr.c function it stands
 * for, and keeps its constants, fixed-point arithmetic and order of updates.
 *
 * What mainline's TCP does not give a BPF congestion control, and what this
 * port does instead (docs/FIDELITY.md, "BBRv2/v3 on the kernel engine"):
 *  - rs->tx_in_flight and rs->lost (v3's tcp_rate.c): rebuilt per ACK from
 *    rs->delivered and a per-socket history of tp->lost (lost_at_send());
 *  - the skb_marked_lost hook: run on the ACK (or RTO) that marked the losses,
 *    with the ACK's rebuilt sample standing for the lost skb's;
 *  - CA_EVENT_TLP_RECOVERY: mainline enters TCP_CA_CWR when a TLP repairs a
 *    loss (tcp_process_tlp_ack); set_state(CWR) without ECN runs v3's
 *    bbr_run_loss_probe_recovery();
 *  - rs->is_acking_tlp_retrans_seq: taken as false;
 *  - ECN: v3 uses it only with TCP_ECN_LOW (a route's ecn_low), which
 *    mainline lacks, so ecn_eligible stays 0 as on a v3 kernel without it;
 *    PLB (off by default, sysctl tcp_plb_enabled) is not ported;
 *  - tso_segs: not set; mainline's tcp_tso_autosize() with min_tso_segs =
 *    sysctl_tcp_min_tso_segs computes what v3's bbr_tso_segs() does;
 *  - get_info: BPF congestion controls cannot answer INET_DIAG_BBRINFO; the
 *    time spent in each state is counted in the `bbr3_stats` array instead;
 *  - struct bbr (v3) is larger than icsk_ca_priv (104 bytes): the state lives
 *    in socket-local storage created by init().
 *
 * Build parameters (python/cclab/engines/kernel/bpf_cc.py sets them):
 *   CCLAB_CA_NAME        the CC's name and the struct_ops map's name
 *   CCLAB_HZ             the kernel's CONFIG_HZ
 *   CCLAB_MAX_TCP_HEADER the kernel's MAX_TCP_HEADER (bytes)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#ifndef CCLAB_CA_NAME
#error "define CCLAB_CA_NAME (e.g. cclab_bbr3)"
#endif
#ifndef CCLAB_HZ
#error "define CCLAB_HZ (the kernel's CONFIG_HZ)"
#endif
#ifndef CCLAB_MAX_TCP_HEADER
#error "define CCLAB_MAX_TCP_HEADER (the kernel's MAX_TCP_HEADER)"
#endif

#define STR2(x) #x
#define STR(x) STR2(x)
#define HZ CCLAB_HZ
#define MAX_TCP_HEADER CCLAB_MAX_TCP_HEADER

char _license[] SEC("license") = "Dual MIT/GPL";

/* --- Units (tcp_bbr.c v3, top of file) ------------------------------------ */
#define BW_SCALE 24
#define BW_UNIT (1ULL << BW_SCALE)
#define BBR_SCALE 8
#define BBR_UNIT (1 << BBR_SCALE)
#define USEC_PER_MSEC 1000ULL
#define USEC_PER_SEC 1000000ULL
#define NSEC_PER_USEC 1000ULL
/* include/net/tcp.h */
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define TCP_ECN_OK 1
/* include/linux/netdevice.h */
#define GSO_LEGACY_MAX_SIZE 65536

enum bbr3_mode { BBR3_STARTUP, BBR3_DRAIN, BBR3_PROBE_BW, BBR3_PROBE_RTT };

/* enum bbr_ack_phase: how the incoming ACKs relate to bw probing. */
enum bbr3_ack_phase {
	ACKS_INIT,
	ACKS_REFILLING,
	ACKS_PROBE_STARTING,
	ACKS_PROBE_FEEDBACK,
	ACKS_PROBE_STOPPING,
};

/* enum bbr_pacing_gain_phase: PROBE_BW's cycle_idx. */
enum bbr3_cycle { BW_PROBE_UP = 0, BW_PROBE_DOWN = 1, BW_PROBE_CRUISE = 2, BW_PROBE_REFILL = 3 };

/* --- Constants (tcp_bbr.c v3, file scope; bbr_param() reads these) -------- */
static const __u32 bbr_min_rtt_win_sec = 10;
static const __u32 bbr_probe_rtt_mode_ms = 200;
static const __u32 bbr_probe_rtt_win_ms = 5000;
static const __u32 bbr_probe_rtt_cwnd_gain = BBR_UNIT * 1 / 2;
static const __u32 bbr_tso_rtt_shift = 9;
static const __u32 bbr_pacing_margin_percent = 1;
/* 4 ln 2 (v1: 2/ln 2). */
static const __u32 bbr_startup_pacing_gain = BBR_UNIT * 277 / 100 + 1;
static const __u32 bbr_startup_cwnd_gain = BBR_UNIT * 2;
static const __u32 bbr_drain_gain = BBR_UNIT * 1000 / 2885;
static const __u32 bbr_cwnd_gain = BBR_UNIT * 2;
/* bbr_pacing_gain[]: UP 5/4, DOWN 0.91, CRUISE 1, REFILL 1. */
static const __u32 gain_up = BBR_UNIT * 5 / 4;
static const __u32 gain_down = BBR_UNIT * 91 / 100;
static const __u32 bbr_cwnd_min_target = 4;
static const __u32 bbr_full_bw_thresh = BBR_UNIT * 5 / 4;
static const __u32 bbr_full_bw_cnt = 3;
static const __u32 bbr_extra_acked_gain = BBR_UNIT;
static const __u32 bbr_extra_acked_win_rtts = 5;
static const __u32 bbr_ack_epoch_acked_reset_thresh = 1U << 20;
static const __u32 bbr_extra_acked_max_us = 100 * 1000;
/* Loss response: cut to (1 - beta) = 0.7; probing went too far above 2% loss. */
static const __u32 bbr_beta = BBR_UNIT * 30 / 100;
static const __u32 bbr_loss_thresh = BBR_UNIT * 2 / 100;
/* STARTUP ends after 6 loss events in a lossy recovery round. */
static const __u32 bbr_full_loss_cnt = 6;
static const __u32 bbr_inflight_headroom = BBR_UNIT * 15 / 100;
/* cwnd_gain + 1/4 in PROBE_UP. */
static const __u32 bbr_bw_probe_cwnd_gain = 1;
static const __u32 bbr_bw_probe_max_rounds = 63;
static const __u32 bbr_bw_probe_rand_rounds = 2;
static const __u32 bbr_bw_probe_base_us = 2 * USEC_PER_SEC;
static const __u32 bbr_bw_probe_rand_us = 1 * USEC_PER_SEC;
static const bool bbr_fast_path = true;

/* Entries of lost_at_send()'s history: at 5% loss and 50 Mbit/s a round of
 * 80 ms holds about 20 loss-marking ACKs. */
#define LOSS_HISTORY 64

/* struct bbr (tcp_bbr.c v3), without PLB and ECN state (see above), plus the
 * port's own loss history. Bit fields become whole fields; the saturations
 * the bit widths imply are written out where v3 relies on them. */
struct bbr3 {
	__u32 min_rtt_us;
	__u32 min_rtt_stamp;
	__u32 probe_rtt_done_stamp;
	__u32 probe_rtt_min_us;
	__u32 probe_rtt_min_stamp;
	__u32 next_rtt_delivered;
	__u64 cycle_mstamp;
	__u8 mode, prev_ca_state, round_start, bw_probe_up_rounds;
	__u8 try_fast_path, idle_restart, probe_rtt_round_done, init_cwnd;
	__u32 pacing_gain, cwnd_gain;
	__u8 full_bw_reached, full_bw_cnt, cycle_idx, has_seen_rtt;
	__u32 prior_cwnd;
	__u32 full_bw;
	__u64 ack_epoch_mstamp;
	__u16 extra_acked[2];
	__u32 ack_epoch_acked;
	__u8 extra_acked_win_rtts, extra_acked_win_idx, full_bw_now, loss_in_cycle;
	__u32 loss_round_delivered;
	__u32 undo_bw_lo, undo_inflight_lo, undo_inflight_hi;
	__u32 bw_latest, bw_lo, bw_hi[2];
	__u32 inflight_latest, inflight_lo, inflight_hi;
	__u32 bw_probe_up_cnt, bw_probe_up_acks;
	__u32 probe_wait_us;
	__u8 bw_probe_samples, prev_probe_too_high, stopped_risky_probe, rounds_since_probe;
	__u8 loss_round_start, loss_in_round, ack_phase, loss_events_in_round;
	/* The port's: tp->lost after the previous ACK, and (tp->delivered, tp->lost)
	 * at each ACK that changed tp->lost (lost_at_send()). */
	__u32 last_lost;
	__u32 hist_next;
	__u32 hist_delivered[LOSS_HISTORY];
	__u32 hist_lost_before[LOSS_HISTORY];
	__u32 hist_lost_after[LOSS_HISTORY];
};

/* What v3 reads from its struct rate_sample beyond mainline's (tx_in_flight,
 * lost), and the per-ACK bbr_context. */
struct v3_sample {
	__u32 tx_in_flight;
	__s32 lost;
	bool is_app_limited;
	__u32 sample_bw;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bbr3);
} bbr3_state SEC(".maps");

/* ACKs seen in each state (0 STARTUP, 1 DRAIN, 2 PROBE_BW DOWN, 3 CRUISE,
 * 4 REFILL, 5 UP, 6 PROBE_RTT), then 7: inflight_hi cuts (loss too high while
 * probing), 8: bw_lo/inflight_lo cuts (loss while not probing). Read by the
 * engine before it unregisters the CC (bpf_cc.py). */
#define STAT_TOO_HIGH 7
#define STAT_LOWER_BOUNDS 8
#define STATS 9
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STATS);
	__type(key, __u32);
	__type(value, __u64);
} bbr3_stats SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&bbr3_stats, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* --- Kernel helpers (include/net/tcp.h, lib/) ------------------------------ */
static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline struct bbr3 *bbr_of(struct sock *sk, bool create)
{
	return bpf_sk_storage_get(&bbr3_state, sk, NULL, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
}

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}
#define after(seq2, seq1) before(seq1, seq2)

static __always_inline __u32 tcp_jiffies32(void)
{
	return (__u32)bpf_jiffies64();
}

/* msecs_to_jiffies() for a constant HZ: round up. */
static __always_inline __u32 msecs_to_jiffies(__u32 ms)
{
	if (1000 % HZ == 0)
		return (ms + (1000 / HZ) - 1) / (1000 / HZ);
	if (HZ % 1000 == 0)
		return ms * (HZ / 1000);
	return (__u32)(((__u64)ms * HZ + 999) / 1000);
}

static __always_inline __u32 tcp_packets_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

static __always_inline __s32 tcp_stamp_us_delta(__u64 t1, __u64 t0)
{
	__s64 d = (__s64)(t1 - t0);

	return d > 0 ? (__s32)d : 0;
}

static __always_inline __u32 tcp_min_rtt(const struct tcp_sock *tp)
{
	return tp->rtt_min.s[0].v;
}

/* get_random_u32_below(): multiply-shift of a random u32. */
static __always_inline __u32 random_below(__u32 ceil)
{
	return (__u32)(((__u64)bpf_get_prandom_u32() * ceil) >> 32);
}

static __always_inline __u32 min_u32(__u32 a, __u32 b) { return a < b ? a : b; }
static __always_inline __u32 max_u32(__u32 a, __u32 b) { return a > b ? a : b; }

/* --- The port's rebuilt rate-sample fields -------------------------------- */
/* tp->lost when the packet that tp->delivered == `delivered` was sent: the
 * value after the last ACK that had delivered no more than that. v3 stores it
 * per skb (scb->tx.lost). */
static __always_inline __u32 lost_at_send(const struct bbr3 *bbr, __u32 delivered)
{
	__u32 lost = bbr->last_lost; /* tp->lost after the previous ACK */

	for (int i = 1; i <= LOSS_HISTORY; i++) {
		__u32 idx = (bbr->hist_next - i) & (LOSS_HISTORY - 1);

		if (bbr->hist_next < (__u32)i)
			break;
		if (!after(bbr->hist_delivered[idx], delivered))
			return bbr->hist_lost_after[idx];
		lost = bbr->hist_lost_before[idx];
	}
	return lost;
}

static __always_inline void note_lost_change(struct bbr3 *bbr, __u32 delivered, __u32 lost)
{
	__u32 idx = bbr->hist_next & (LOSS_HISTORY - 1);

	bbr->hist_delivered[idx] = delivered;
	bbr->hist_lost_before[idx] = bbr->last_lost;
	bbr->hist_lost_after[idx] = lost;
	bbr->hist_next++;
	bbr->last_lost = lost;
}

/* v3's rs->lost (tp->lost - scb->tx.lost) and rs->tx_in_flight (packets in
 * flight when the sampled skb left, itself included): every packet in flight
 * then has since been delivered (rs->delivered counts them, the skb too) or
 * marked lost (rs->lost), or is still unresolved (not counted). */
static __always_inline void rebuild_sample(struct sock *sk, const struct bbr3 *bbr,
					   const struct rate_sample *rs, struct v3_sample *v3)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__s32 lost = 0;

	v3->tx_in_flight = 0;
	v3->lost = 0;
	v3->is_app_limited = rs->is_app_limited;
	if (rs->delivered < 0 || !rs->prior_mstamp)
		return;
	lost = (__s32)(tp->lost - lost_at_send(bbr, rs->prior_delivered));
	v3->lost = lost > 0 ? lost : 0;
	v3->tx_in_flight = (__u32)rs->delivered + (__u32)v3->lost;
}

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

/* bbr_tso_segs_goal() (v3: bbr_tso_segs_generic with GSO_LEGACY_MAX_SIZE):
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
	bbr->loss_in_cycle = 0;
	bbr->bw_latest = 0;
	bbr->inflight_latest = 0;
}

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
	bbr_reset_full_bw(bbr);
	bbr->full_bw = v3->sample_bw;
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

	if (!tp->is_cwnd_limited || tp->snd_cwnd < bbr->inflight_hi)
		return;
	bbr->bw_probe_up_acks += rs->acked_sacked;
	if (bbr->bw_probe_up_acks >= bbr->bw_probe_up_cnt) {
		delta = bbr->bw_probe_up_acks / bbr->bw_probe_up_cnt;
		bbr->bw_probe_up_acks -= delta * bbr->bw_probe_up_cnt;
		bbr->inflight_hi += delta;
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
	bbr->full_bw_reached = 1;
	bbr->inflight_hi = max_u32(bbr_inflight(sk, bbr, bbr_max_bw(bbr), BBR_UNIT), bbr->inflight_latest);
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

static __always_inline void bbr_check_full_bw_reached(struct bbr3 *bbr, const struct rate_sample *rs,
						      const struct v3_sample *v3)
{
	__u32 bw_thresh;

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
	if (rs->rtt_us >= 0 && (rs->rtt_us < bbr->probe_rtt_min_us || (probe_rtt_expired && !rs->is_ack_delayed))) {
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

/* bbr_run_fast_path(): app-limited, no loss, sample below max bw. */
static __always_inline bool bbr_run_fast_path(struct sock *sk, struct bbr3 *bbr, bool *update_model,
					      const struct rate_sample *rs, const struct v3_sample *v3)
{
	__u32 prev_min_rtt_us, prev_mode;

	if (bbr_fast_path && bbr->try_fast_path && rs->is_app_limited && v3->sample_bw < bbr_max_bw(bbr) &&
	    !bbr->loss_in_round) {
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

/* --- tcp_congestion_ops (tcp_bbr.c v3 tcp_bbr_cong_ops) -------------------- */
SEC("struct_ops")
void BPF_PROG(bbr3_main, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr3 *bbr = bbr_of(sk, false);
	struct v3_sample v3 = {};
	bool update_model = true;
	__u32 bw, newly_lost;

	if (!bbr) /* tcp_rcv_synsent_state_process() ACKs before init() */
		return;
	rebuild_sample(sk, bbr, rs, &v3);
	newly_lost = tp->lost - bbr->last_lost;
	if (newly_lost) {
		note_lost_change(bbr, tp->delivered, tp->lost);
		marked_lost(sk, bbr, &v3, newly_lost);
	}

	bbr_update_round_start(sk, bbr, rs);
	if (bbr->round_start)
		bbr->rounds_since_probe = min_u32(bbr->rounds_since_probe + 1, 0xFF);
	v3.sample_bw = bbr_calculate_bw_sample(rs);
	bbr_update_latest_delivery_signals(sk, bbr, rs, &v3);

	if (bbr_run_fast_path(sk, bbr, &update_model, rs, &v3))
		goto out;
	if (update_model) {
		bbr_update_congestion_signals(sk, bbr, rs, &v3);
		bbr_update_ack_aggregation(sk, bbr, rs);
		bbr_check_loss_too_high_in_startup(sk, bbr, rs, &v3);
		bbr_check_full_bw_reached(bbr, rs, &v3);
		bbr_check_drain(sk, bbr);
		bbr_update_cycle_phase(sk, bbr, rs, &v3);
		bbr_update_min_rtt(sk, bbr, rs);
	}
	bbr_update_gains(bbr);
	bw = bbr_bw(bbr);
	bbr_set_pacing_rate(sk, bbr, bw, bbr->pacing_gain);
	bbr_set_cwnd(sk, bbr, rs->acked_sacked, bw, bbr->cwnd_gain);
	bbr_bound_cwnd_for_inflight_model(sk, bbr);
out:
	bbr_advance_latest_delivery_signals(bbr, rs, &v3);
	bbr->prev_ca_state = inet_csk(sk)->icsk_ca_state;
	bbr->loss_in_cycle |= v3.lost > 0;
	count(stat_index(bbr));
}

SEC("struct_ops")
void BPF_PROG(bbr3_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr3 *bbr = bbr_of(sk, true);

	if (!bbr)
		return;
	__builtin_memset(bbr, 0, sizeof(*bbr));
	bbr->init_cwnd = min_u32(0x7F, tp->snd_cwnd);
	bbr->prior_cwnd = tp->prior_cwnd;
	tp->snd_ssthresh = TCP_INFINITE_SSTHRESH;
	bbr->next_rtt_delivered = tp->delivered;
	bbr->prev_ca_state = TCP_CA_Open;
	bbr->probe_rtt_min_us = tcp_min_rtt(tp);
	bbr->probe_rtt_min_stamp = tcp_jiffies32();
	bbr->min_rtt_us = tcp_min_rtt(tp);
	bbr->min_rtt_stamp = tcp_jiffies32();
	bbr_init_pacing_rate_from_rtt(sk, bbr);
	bbr->mode = BBR3_STARTUP;
	bbr->ack_epoch_mstamp = tp->tcp_mstamp;
	/* Linux: cmpxchg(NONE -> NEEDED): TCP's internal pacing without fq. */
	if (sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
	bbr->loss_round_delivered = tp->delivered + 1;
	bbr_reset_congestion_signals(bbr);
	bbr->bw_lo = ~0U;
	bbr->inflight_lo = ~0U;
	bbr->inflight_hi = ~0U;
	bbr_reset_full_bw(bbr);
	bbr->bw_probe_up_cnt = ~0U;
	bbr->ack_phase = ACKS_INIT;
	bbr->last_lost = tp->lost;
}

SEC("struct_ops")
__u32 BPF_PROG(bbr3_sndbuf_expand, struct sock *sk)
{
	return 3;
}

/* bbr_undo_cwnd(): a spurious loss episode; restore the saved bounds. */
SEC("struct_ops")
__u32 BPF_PROG(bbr3_undo_cwnd, struct sock *sk)
{
	struct bbr3 *bbr = bbr_of(sk, false);
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	if (!bbr)
		return cwnd;
	bbr_reset_full_bw(bbr);
	bbr->loss_in_round = 0;
	bbr->bw_lo = max_u32(bbr->bw_lo, bbr->undo_bw_lo);
	bbr->inflight_lo = max_u32(bbr->inflight_lo, bbr->undo_inflight_lo);
	bbr->inflight_hi = max_u32(bbr->inflight_hi, bbr->undo_inflight_hi);
	bbr->try_fast_path = 0;
	cwnd = bbr->prior_cwnd;
	barrier_var(cwnd); /* one load per pointer kind, for the verifier */
	return cwnd;
}

/* bbr_run_loss_probe_recovery(): a TLP repaired the loss of one segment. */
static __always_inline void bbr_run_loss_probe_recovery(struct sock *sk, struct bbr3 *bbr)
{
	struct v3_sample v3 = {};

	bbr_note_loss(sk, bbr);
	if (!bbr->bw_probe_samples)
		return;
	v3.lost = 1;
	v3.tx_in_flight = bbr->inflight_latest + 1;
	v3.is_app_limited = tcp_sk(sk)->app_limited != 0; /* v3: tp->tlp_orig_data_app_limited */
	if (bbr_is_inflight_too_high(&v3))
		bbr_handle_inflight_too_high(sk, bbr, &v3);
}

SEC("struct_ops")
void BPF_PROG(bbr3_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr3 *bbr = bbr_of(sk, false);

	if (!bbr || event != CA_EVENT_TX_START || !tp->app_limited)
		return;
	bbr->idle_restart = 1;
	bbr->ack_epoch_mstamp = tp->tcp_mstamp;
	bbr->ack_epoch_acked = 0;
	if (bbr->mode == BBR3_PROBE_BW)
		bbr_set_pacing_rate(sk, bbr, bbr_bw(bbr), BBR_UNIT);
	else if (bbr->mode == BBR3_PROBE_RTT)
		bbr_check_probe_rtt_done(sk, bbr);
}

/* bbr_ssthresh(): entering recovery; save state for undo. */
SEC("struct_ops")
__u32 BPF_PROG(bbr3_ssthresh, struct sock *sk)
{
	struct bbr3 *bbr = bbr_of(sk, false);

	if (bbr) {
		bbr_save_cwnd(sk, bbr);
		bbr->undo_bw_lo = bbr->bw_lo;
		bbr->undo_inflight_lo = bbr->inflight_lo;
		bbr->undo_inflight_hi = bbr->inflight_hi;
	}
	return tcp_sk(sk)->snd_ssthresh;
}

SEC("struct_ops")
void BPF_PROG(bbr3_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct bbr3 *bbr = bbr_of(sk, false);

	if (!bbr)
		return;
	if (new_state == TCP_CA_Loss) {
		bbr->prev_ca_state = TCP_CA_Loss;
		bbr_reset_full_bw(bbr);
		if (!bbr_is_probing_bandwidth(bbr) && bbr->inflight_lo == ~0U)
			bbr->inflight_lo = max_u32(tp->snd_cwnd, bbr->prior_cwnd);
	} else if (bbr->prev_ca_state == TCP_CA_Loss && new_state != TCP_CA_Loss) {
		/* bbr_exit_loss_recovery() */
		tp->snd_cwnd = max_u32(tp->snd_cwnd, bbr->prior_cwnd);
		bbr->try_fast_path = 0;
	}
	/* Mainline's TLP repair (tcp_process_tlp_ack) enters CWR where v3 sends
	 * CA_EVENT_TLP_RECOVERY; without ECN nothing else enters CWR. */
	if (new_state == TCP_CA_CWR && !(tp->ecn_flags & TCP_ECN_OK))
		bbr_run_loss_probe_recovery(sk, bbr);
}

SEC(".struct_ops")
struct tcp_congestion_ops CCLAB_CA_NAME = {
	.init = (void *)bbr3_init,
	.cong_control = (void *)bbr3_main,
	.sndbuf_expand = (void *)bbr3_sndbuf_expand,
	.undo_cwnd = (void *)bbr3_undo_cwnd,
	.cwnd_event = (void *)bbr3_cwnd_event,
	.ssthresh = (void *)bbr3_ssthresh,
	.set_state = (void *)bbr3_set_state,
	.name = STR(CCLAB_CA_NAME),
};
