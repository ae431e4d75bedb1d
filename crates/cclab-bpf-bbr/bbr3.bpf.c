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
 * BBRv2 (-DCCLAB_BBR_V2ALPHA, cclab_bbr2): google/bbr branch v2alpha,
 * net/ipv4/tcp_bbr2.c, is v3's ancestor: the same model, bounds and PROBE_BW
 * phases with other constants (state.h) and the paths marked
 * `if (bbr_v2alpha)`: v1's once-a-round STARTUP exit, PROBE_UP ending at
 * 1.25 x BDP after a min_rtt, the congestion signals updated with the model
 * only, the round counter starting at 0, no TLP-recovery response (v3 only),
 * and v2alpha's RTO/undo bookkeeping. The rebuilt rate sample and the
 * skb_marked_lost stand-in above serve both. ECN: v2alpha acts on it only with
 * its ecn_enable module parameter (off by default), so ecn_eligible stays 0
 * as there; an ACK with ECE still stops the fast path for the round, as in
 * bbr2_main (mainline passes FLAG_ECE in cong_control's flag).
 *
 * Build parameters (python/cclab/engines/kernel/bpf_cc.py sets them):
 *   CCLAB_BBR_V2ALPHA    defined: BBRv2 (tcp_bbr2.c) instead of v3
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

#include "bbr3/state.h"
#include "bbr3/rate_sample.h"
#include "bbr3/estimates.h"
#include "bbr3/probe_bw.h"
#include "bbr3/model.h"

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
	if (bbr_v2alpha)
		bbr->ecn_in_round |= (flag & FLAG_ECE) != 0; /* bbr2_main: rs->is_ece */
	else
		bbr_update_latest_delivery_signals(sk, bbr, rs, &v3);

	if (bbr_run_fast_path(sk, bbr, &update_model, rs, &v3))
		goto out;
	if (update_model) {
		if (bbr_v2alpha)
			bbr2_update_congestion_signals(sk, bbr, rs, &v3);
		else
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
	if (!bbr_v2alpha)
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
	bbr->next_rtt_delivered = bbr_v2alpha ? 0 : tp->delivered; /* bbr_init() of each */
	bbr->prev_ca_state = TCP_CA_Open;
	bbr->probe_rtt_min_us = tcp_min_rtt(tp);
	bbr->probe_rtt_min_stamp = tcp_jiffies32();
	bbr->min_rtt_us = tcp_min_rtt(tp);
	bbr->min_rtt_stamp = tcp_jiffies32();
	bbr->init_stamp = tcp_jiffies32();
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
	if (!bbr_v2alpha)
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
		if (bbr_v2alpha)
			bbr->full_bw = 0; /* bbr2_set_state() keeps full_bw_cnt */
		else
			bbr_reset_full_bw(bbr);
		/* bbr_adapt_lower_bounds() needs the cwnd from before the RTO:
		 * v2alpha takes prior_cwnd, v3 the larger of it and cwnd. */
		if (!bbr_is_probing_bandwidth(bbr) && bbr->inflight_lo == ~0U)
			bbr->inflight_lo = bbr_v2alpha ? bbr->prior_cwnd : max_u32(tp->snd_cwnd, bbr->prior_cwnd);
	} else if (bbr->prev_ca_state == TCP_CA_Loss && new_state != TCP_CA_Loss) {
		/* bbr_exit_loss_recovery() */
		tp->snd_cwnd = max_u32(tp->snd_cwnd, bbr->prior_cwnd);
		bbr->try_fast_path = 0;
	}
	/* Mainline's TLP repair (tcp_process_tlp_ack) enters CWR where v3 sends
	 * CA_EVENT_TLP_RECOVERY; without ECN nothing else enters CWR. v2alpha
	 * has no such response. */
	if (!bbr_v2alpha && new_state == TCP_CA_CWR && !(tp->ecn_flags & TCP_ECN_OK))
		bbr_run_loss_probe_recovery(sk, bbr);
}

#ifdef CCLAB_BBR_V2ALPHA
/* tcp_bbr2.c .tso_segs = bbr_tso_segs(): mainline's tcp_tso_autosize() with
 * this minimum computes it (v3 leaves the minimum to the sysctl). */
SEC("struct_ops")
__u32 BPF_PROG(bbr2_min_tso_segs, struct sock *sk)
{
	return bbr_min_tso_segs(sk);
}
#endif

SEC(".struct_ops")
struct tcp_congestion_ops CCLAB_CA_NAME = {
	.init = (void *)bbr3_init,
	.cong_control = (void *)bbr3_main,
	.sndbuf_expand = (void *)bbr3_sndbuf_expand,
	.undo_cwnd = (void *)bbr3_undo_cwnd,
	.cwnd_event = (void *)bbr3_cwnd_event,
	.ssthresh = (void *)bbr3_ssthresh,
	.set_state = (void *)bbr3_set_state,
#ifdef CCLAB_BBR_V2ALPHA
	.min_tso_segs = (void *)bbr2_min_tso_segs,
#endif
	.name = STR(CCLAB_CA_NAME),
};
