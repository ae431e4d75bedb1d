// SPDX-License-Identifier: MIT
/*
 * DCTCP as a BPF struct_ops congestion control, for kernels built without
 * tcp_dctcp (CONFIG_TCP_CONG_DCTCP). The algorithm of Linux net/ipv4/tcp_dctcp.c
 * and tcp_dctcp.h (6.x) and RFC 8257: the same state, constants, fixed-point
 * arithmetic and order of updates; each function names the one it stands for.
 * crates/cclab-cc/src/dctcp.rs is the simulator's port of the same code.
 *
 * Build parameter (python/cclab/engines/kernel/bpf_cc.py sets it):
 *   CCLAB_CA_NAME   the CC's name and the struct_ops map's name (cclab_dctcp)
 *
 * Where a BPF CC cannot do what the module does (named, so that a difference
 * between the two can be traced to it):
 * - The fallback without ECN: tcp_dctcp.c's init switches icsk_ca_ops to
 *   dctcp_reno and clears ECT from the socket (INET_ECN_dontxmit). A struct_ops
 *   program may not write either, so the fallback is a flag in the CC's state
 *   that makes every hook act as dctcp_reno's (Reno's ssthresh, cong_avoid and
 *   undo; no alpha, no CE echo). The socket keeps ECT on its packets; the kernel
 *   engine always negotiates ECN for DCTCP (TCP_CONG_NEEDS_ECN), so this path
 *   runs only if the peer refuses ECN.
 * - get_info (INET_DIAG_DCTCPINFO): not available to BPF CCs (bpf_tcp_ca.c).
 * - dctcp_shift_g and dctcp_alpha_on_init are module parameters; here they are
 *   their defaults, fixed.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
/* before(), min_u32(), min_not_zero_u32() ...: what the kernel's headers give a module, one
 * copy for every port. */
#include "../cclab-bpf-common/cclab_tcp.h"

#ifndef CCLAB_CA_NAME
#error "define CCLAB_CA_NAME (e.g. cclab_dctcp)"
#endif

#define STR2(x) #x
#define STR(x) STR2(x)

char _license[] SEC("license") = "Dual MIT/GPL";

/* include/net/tcp.h */
#define TCP_ECN_OK 1
#define TCP_ECN_DEMAND_CWR 4
#define TCP_CONG_NEEDS_ECN 0x2
/* ICSK_ACK_TIMER, ICSK_ACK_NOW (inet_connection_sock.h), TCP_LISTEN, TCP_CLOSE
 * (tcp_states.h), TCP_CA_Recovery and CA_EVENT_* (tcp.h) are enums: vmlinux.h has them. */

/* tcp_dctcp.c */
#define DCTCP_MAX_ALPHA 1024U
/* dctcp_shift_g: g = 1/2^4 (module parameter, default 4; RFC 8257 section 3.3). */
static const __u32 dctcp_shift_g = 4;
/* dctcp_alpha_on_init: alpha starts at its maximum (module parameter, default). */
static const __u32 dctcp_alpha_on_init = DCTCP_MAX_ALPHA;

/* The kernel's own Reno pieces (bpf_tcp_ca.c exports them as kfuncs). */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* tcp_dctcp.c struct dctcp, and the fallback flag (see the top of the file). */
struct cclab_dctcp {
	__u32 old_delivered;
	__u32 old_delivered_ce;
	__u32 prior_rcv_nxt;
	__u32 dctcp_alpha;
	__u32 next_seq;
	__u32 ce_state;
	__u32 loss_cwnd;
	__u32 reno_fallback;
};

/* What the port did, per run (bpf_cc.py reads it into provenance before unregistering):
 * counts of each reaction, and the largest ssthresh and undo window it returned. */
enum dctcp_stat {
	STAT_ALPHA_UPDATES,	/* windows closed by dctcp_update_alpha */
	STAT_SSTHRESH_CALLS,	/* window reductions (ECE or loss) asking ssthresh */
	STAT_LOSS_REACTIONS,	/* dctcp_react_to_loss (Recovery entered, RTO) */
	STAT_CE_STATE_CHANGES,	/* receiver: CE state flips, each ACKed at once */
	STAT_RENO_FALLBACKS,	/* sockets that had no ECN at init */
	STAT_MAX_SSTHRESH,
	STAT_MAX_UNDO_CWND,
	STAT_MAX_ALPHA,
	DCTCP_STATS,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DCTCP_STATS);
	__type(key, __u32);
	__type(value, __u64);
} dctcp_stats SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&dctcp_stats, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline void raise_to(__u32 idx, __u64 value)
{
	__u64 *v = bpf_map_lookup_elem(&dctcp_stats, &idx);

	if (v && *v < value)
		*v = value;
}

static __always_inline struct cclab_dctcp *dctcp_of(struct sock *sk)
{
	return (struct cclab_dctcp *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline struct tcp_sock *tcp_of(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

/* dctcp_reset() */
static __always_inline void dctcp_reset(const struct tcp_sock *tp, struct cclab_dctcp *ca)
{
	ca->next_seq = tp->snd_nxt;
	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

/* dctcp_init(): DCTCP where ECN was negotiated (or on a listening or closed
 * socket, whose children inherit the CC before negotiating), else Reno. */
SEC("struct_ops")
void BPF_PROG(dctcp_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct cclab_dctcp *ca = dctcp_of(sk);
	__u8 state = sk->__sk_common.skc_state;

	if ((tp->ecn_flags & TCP_ECN_OK) || state == TCP_LISTEN || state == TCP_CLOSE) {
		ca->prior_rcv_nxt = tp->rcv_nxt;
		ca->dctcp_alpha = min_u32(dctcp_alpha_on_init, DCTCP_MAX_ALPHA);
		ca->loss_cwnd = 0;
		ca->ce_state = 0;
		ca->reno_fallback = 0;
		dctcp_reset(tp, ca);
		return;
	}
	ca->reno_fallback = 1;
	count(STAT_RENO_FALLBACKS);
}

/* dctcp_ssthresh(): cwnd x (1 - alpha / 2), alpha in 1/1024. */
SEC("struct_ops")
__u32 BPF_PROG(dctcp_ssthresh, struct sock *sk)
{
	struct cclab_dctcp *ca = dctcp_of(sk);
	struct tcp_sock *tp = tcp_of(sk);

	__u32 ssthresh;

	if (ca->reno_fallback)
		return tcp_reno_ssthresh(sk);
	ca->loss_cwnd = tp->snd_cwnd;
	ssthresh = max_u32(tp->snd_cwnd - ((tp->snd_cwnd * ca->dctcp_alpha) >> 11U), 2U);
	count(STAT_SSTHRESH_CALLS);
	raise_to(STAT_MAX_SSTHRESH, ssthresh);
	return ssthresh;
}

/* dctcp_update_alpha(): once per window of data (snd_una past next_seq),
 * alpha = (1 - g) alpha + g F, F the fraction of delivered packets that were
 * CE-marked (tp->delivered_ce counts them from the receiver's ECE echo). */
SEC("struct_ops")
void BPF_PROG(dctcp_update_alpha, struct sock *sk, __u32 flags)
{
	const struct tcp_sock *tp = tcp_of(sk);
	struct cclab_dctcp *ca = dctcp_of(sk);

	if (ca->reno_fallback)
		return;
	if (!before(tp->snd_una, ca->next_seq)) {
		__u32 delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
		__u32 alpha = ca->dctcp_alpha;

		alpha -= min_not_zero_u32(alpha, alpha >> dctcp_shift_g);
		if (delivered_ce) {
			__u32 delivered = tp->delivered - ca->old_delivered;

			/* With dctcp_shift_g == 1 a 32-bit value would overflow after 8 M packets. */
			delivered_ce <<= (10 - dctcp_shift_g);
			delivered_ce /= max_u32(1U, delivered);
			alpha = min_u32(alpha + delivered_ce, DCTCP_MAX_ALPHA);
		}
		ca->dctcp_alpha = alpha;
		dctcp_reset(tp, ca);
		count(STAT_ALPHA_UPDATES);
		raise_to(STAT_MAX_ALPHA, alpha);
	}
}

/* dctcp_react_to_loss(): a loss halves the window, as Reno. */
static __always_inline void dctcp_react_to_loss(struct sock *sk)
{
	struct cclab_dctcp *ca = dctcp_of(sk);
	struct tcp_sock *tp = tcp_of(sk);

	ca->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = max_u32(tp->snd_cwnd >> 1U, 2U);
	count(STAT_LOSS_REACTIONS);
}

/* dctcp_state(): entering Recovery is a loss; an RTO is handled in cwnd_event
 * (CA_EVENT_LOSS) so that one RTT sees one reduction. */
SEC("struct_ops")
void BPF_PROG(dctcp_state, struct sock *sk, __u8 new_state)
{
	if (dctcp_of(sk)->reno_fallback)
		return;
	if (new_state == TCP_CA_Recovery && new_state != BPF_CORE_READ_BITFIELD((struct inet_connection_sock *)sk, icsk_ca_state))
		dctcp_react_to_loss(sk);
}

/* tcp_dctcp.h dctcp_ece_ack_cwr(): the receiver's ECE follows its CE state. */
static __always_inline void dctcp_ece_ack_cwr(struct sock *sk, __u32 ce_state)
{
	struct tcp_sock *tp = tcp_of(sk);

	if (ce_state == 1)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

/* tcp_dctcp.h dctcp_ece_ack_update(): the receiver's CE state machine
 * (RFC 8257 section 3.2). When the CE state of arriving data changes, an ACK
 * that was being delayed goes out first with the old state, and the next ACK
 * is sent at once, so the sender sees exactly which bytes were marked. */
static __always_inline void dctcp_ece_ack_update(struct sock *sk, enum tcp_ca_event evt, __u32 *prior_rcv_nxt, __u32 *ce_state)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	__u32 new_ce_state = (evt == CA_EVENT_ECN_IS_CE) ? 1 : 0;

	if (*ce_state != new_ce_state) {
		count(STAT_CE_STATE_CHANGES);
		if (icsk->icsk_ack.pending & ICSK_ACK_TIMER) {
			dctcp_ece_ack_cwr(sk, *ce_state);
			bpf_tcp_send_ack(sk, *prior_rcv_nxt);
		}
		icsk->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	*prior_rcv_nxt = tcp_of(sk)->rcv_nxt;
	*ce_state = new_ce_state;
	dctcp_ece_ack_cwr(sk, new_ce_state);
}

/* dctcp_cwnd_event() */
SEC("struct_ops")
void BPF_PROG(dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct cclab_dctcp *ca = dctcp_of(sk);

	if (ca->reno_fallback)
		return;
	switch (ev) {
	case CA_EVENT_ECN_IS_CE:
	case CA_EVENT_ECN_NO_CE:
		dctcp_ece_ack_update(sk, ev, &ca->prior_rcv_nxt, &ca->ce_state);
		break;
	case CA_EVENT_LOSS:
		dctcp_react_to_loss(sk);
		break;
	default:
		break;
	}
}

/* dctcp_cwnd_undo() */
SEC("struct_ops")
__u32 BPF_PROG(dctcp_cwnd_undo, struct sock *sk)
{
	const struct cclab_dctcp *ca = dctcp_of(sk);

	__u32 cwnd;

	if (ca->reno_fallback)
		return tcp_reno_undo_cwnd(sk);
	cwnd = max_u32(tcp_of(sk)->snd_cwnd, ca->loss_cwnd);
	raise_to(STAT_MAX_UNDO_CWND, cwnd);
	return cwnd;
}

/* tcp_dctcp.c uses tcp_reno_cong_avoid itself. */
SEC("struct_ops")
void BPF_PROG(dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC(".struct_ops")
struct tcp_congestion_ops CCLAB_CA_NAME = {
	.init = (void *)dctcp_init,
	.in_ack_event = (void *)dctcp_update_alpha,
	.cwnd_event = (void *)dctcp_cwnd_event,
	.ssthresh = (void *)dctcp_ssthresh,
	.cong_avoid = (void *)dctcp_cong_avoid,
	.undo_cwnd = (void *)dctcp_cwnd_undo,
	.set_state = (void *)dctcp_state,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = STR(CCLAB_CA_NAME),
};
