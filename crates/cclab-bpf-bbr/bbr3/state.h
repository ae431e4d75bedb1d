// SPDX-License-Identifier: MIT
/* bbr3.bpf.c's state.h: Units, constants, per-socket state and maps of the BBRv3 port, and the kernel helpers it needs. */
#pragma once

/* -DCCLAB_BBR_V2ALPHA builds google/bbr v2alpha's net/ipv4/tcp_bbr2.c instead
 * (cc bbr2): its constants below, and the paths marked `if (bbr_v2alpha)`.
 * Its programs and maps take v2 names, so bpftool tells the two ports apart. */
#ifdef CCLAB_BBR_V2ALPHA
static const bool bbr_v2alpha = true;
#define bbr3_main bbr2_main
#define bbr3_state bbr2_state
#define bbr3_stats bbr2_stats
#else
static const bool bbr_v2alpha = false;
#endif

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
/* net/ipv4/tcp_input.c: the ACK carried ECE (v2alpha's tcp_ack: rs.is_ece) */
#define FLAG_ECE 0x40
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
#ifdef CCLAB_BBR_V2ALPHA
/* tcp_bbr2.c bbr_high_gain and bbr_startup_cwnd_gain: 2/ln 2 (v1's). */
static const __u32 bbr_startup_pacing_gain = BBR_UNIT * 2885 / 1000 + 1;
static const __u32 bbr_startup_cwnd_gain = BBR_UNIT * 2885 / 1000 + 1;
#else
/* 4 ln 2 (v1: 2/ln 2). */
static const __u32 bbr_startup_pacing_gain = BBR_UNIT * 277 / 100 + 1;
static const __u32 bbr_startup_cwnd_gain = BBR_UNIT * 2;
#endif
static const __u32 bbr_drain_gain = BBR_UNIT * 1000 / 2885;
static const __u32 bbr_cwnd_gain = BBR_UNIT * 2;
/* bbr_pacing_gain[]: UP 5/4, DOWN 0.91 (tcp_bbr2.c: 3/4), CRUISE 1, REFILL 1. */
static const __u32 gain_up = BBR_UNIT * 5 / 4;
#ifdef CCLAB_BBR_V2ALPHA
static const __u32 gain_down = BBR_UNIT * 3 / 4;
#else
static const __u32 gain_down = BBR_UNIT * 91 / 100;
#endif
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
static const __u32 bbr_inflight_headroom = BBR_UNIT * 15 / 100;
#ifdef CCLAB_BBR_V2ALPHA
/* STARTUP ends after 8 loss events in a lossy recovery round. */
static const __u32 bbr_full_loss_cnt = 8;
/* PROBE_UP keeps bbr_cwnd_gain (v2alpha has no bbr_bw_probe_cwnd_gain). */
static const __u32 bbr_bw_probe_cwnd_gain = 0;
#else
/* STARTUP ends after 6 loss events in a lossy recovery round. */
static const __u32 bbr_full_loss_cnt = 6;
/* cwnd_gain + 1/4 in PROBE_UP. */
static const __u32 bbr_bw_probe_cwnd_gain = 1;
#endif
/* tcp_bbr2.c only: PROBE_UP ends once inflight reaches 1.25 x BDP after a
 * min_rtt (v3 ends it on a bw plateau), and below bbr_min_tso_rate (bit/s)
 * an skb holds one segment (bbr_min_tso_segs; v3 takes the sysctl's 2). */
static const __u32 bbr_bw_probe_pif_gain = BBR_UNIT * 5 / 4;
static const __u64 bbr_min_tso_rate = 1200000;
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
	__u8 ecn_in_round; /* v2alpha: an ACK of this round carried ECE */
	/* The port's: tp->lost after the previous ACK, and (tp->delivered, tp->lost)
	 * at each ACK that changed tp->lost (lost_at_send()). */
	__u32 last_lost;
	__u32 hist_next;
	__u32 hist_delivered[LOSS_HISTORY];
	__u32 hist_lost_before[LOSS_HISTORY];
	__u32 hist_lost_after[LOSS_HISTORY];
	__u32 init_stamp; /* the port's: jiffies at init, for the stats' times */
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
 * probing), 8: bw_lo/inflight_lo cuts (loss while not probing), 9: the last
 * time (ms after the flow's init) an RTT sample in PROBE_BW restarted PROBE_RTT's
 * 5 s clock by beating the window's minimum, putting PROBE_RTT off; the latest
 * over flows. Read by the engine before it unregisters the CC (bpf_cc.py). */
#define STAT_TOO_HIGH 7
#define STAT_LOWER_BOUNDS 8
#define STAT_PROBE_RTT_LAST_POSTPONED_MS 9
#define STATS 10
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

/* Raises entry idx to value (a latest time: only ever grows, so a lost race
 * between flows keeps a value one of them wrote). */
static __always_inline void record_max(__u32 idx, __u64 value)
{
	__u64 *v = bpf_map_lookup_elem(&bbr3_stats, &idx);

	if (v && *v < value)
		*v = value;
}

/* --- Kernel helpers: tcp_sk(), before(), the jiffies helpers, min_u32() ... (one copy for
 * every port) ------------------------------------------------------------------ */
#include "../../cclab-bpf-common/cclab_tcp.h"

static __always_inline struct bbr3 *bbr_of(struct sock *sk, bool create)
{
	return bpf_sk_storage_get(&bbr3_state, sk, NULL, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
}
