// SPDX-License-Identifier: MIT
/*
 * TCP Vegas (Brakmo and Peterson, "TCP Vegas: End to End Congestion Avoidance on a Global
 * Internet", IEEE JSAC 13(8), 1995) as Linux runs it (net/ipv4/tcp_vegas.c), written as a BPF
 * struct_ops congestion control: a delay-based CC that keeps between ALPHA and BETA of its
 * own packets queued at the bottleneck. Once per RTT it compares the window it has with the
 * window the minimum RTT of that round says it needs:
 *
 *     diff = cwnd x (rtt - base_rtt) / base_rtt      (packets it has queued)
 *
 * and grows the window by one if diff < ALPHA, shrinks it by one if diff > BETA; in slow
 * start it leaves for congestion avoidance once diff > GAMMA, at the rate it measured. Loss
 * recovery is Reno's (the kernel's tcp_reno_* kfuncs), as in tcp_vegas.c.
 *
 *     [[flows]]
 *     cc = "cc/vegas.bpf.c"
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

/* tcp_vegas.c's module parameters, at their defaults (packets). */
#define ALPHA 2
#define BETA 4
#define GAMMA 1
#define NO_RTT 0x7fffffff

struct vegas {
	__u32 beg_snd_nxt; /* snd_nxt when this round began: its end is an ACK past it */
	__u32 base_rtt_us; /* the least RTT seen: the path's propagation delay */
	__u32 min_rtt_us; /* the least RTT of this round: propagation and queueing */
	__u32 rtt_count; /* RTT samples this round */
	__u32 enabled; /* rounds are counted only in TCP_CA_Open */
};

static __always_inline struct vegas *vegas_of(struct sock *sk)
{
	return (struct vegas *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline struct tcp_sock *tp_of(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline int seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

/* A new round starts at the next send: a restart, recovery's end or the connection's start
 * leaves no RTT of this round to judge by. */
static __always_inline void vegas_enable(struct sock *sk)
{
	struct vegas *v = vegas_of(sk);

	v->enabled = 1;
	v->beg_snd_nxt = tp_of(sk)->snd_nxt;
	v->rtt_count = 0;
	v->min_rtt_us = NO_RTT;
}

SEC("struct_ops")
void BPF_PROG(vegas_init, struct sock *sk)
{
	vegas_of(sk)->base_rtt_us = NO_RTT;
	vegas_enable(sk);
}

SEC("struct_ops")
void BPF_PROG(vegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct vegas *v = vegas_of(sk);
	__u32 rtt_us;

	if (sample->rtt_us < 0)
		return;
	rtt_us = sample->rtt_us + 1; /* never zero */
	if (rtt_us < v->base_rtt_us)
		v->base_rtt_us = rtt_us;
	if (rtt_us < v->min_rtt_us)
		v->min_rtt_us = rtt_us;
	v->rtt_count++;
}

SEC("struct_ops")
void BPF_PROG(vegas_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Open)
		vegas_enable(sk);
	else
		vegas_of(sk)->enabled = 0;
}

SEC("struct_ops")
void BPF_PROG(vegas_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START) {
		vegas_of(sk)->base_rtt_us = NO_RTT;
		vegas_enable(sk);
	}
}

SEC("struct_ops")
void BPF_PROG(vegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tp_of(sk);
	struct vegas *v = vegas_of(sk);
	int in_slow_start = tp->snd_cwnd < tp->snd_ssthresh;

	if (!v->enabled) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (!seq_after(ack, v->beg_snd_nxt)) {
		if (in_slow_start)
			tcp_slow_start(tp, acked);
		return;
	}
	/* The round ended: judge it, once. */
	v->beg_snd_nxt = tp->snd_nxt;
	if (v->rtt_count <= 2) {
		/* One or two samples a round are delayed ACKs' (tcp_vegas.c): behave as Reno. */
		tcp_reno_cong_avoid(sk, ack, acked);
	} else {
		__u32 rtt = v->min_rtt_us;
		__u32 target = (__u32)((__u64)tp->snd_cwnd * v->base_rtt_us / rtt);
		__u32 diff = tp->snd_cwnd * (rtt - v->base_rtt_us) / v->base_rtt_us;
		__u32 three_quarters;

		if (diff > GAMMA && in_slow_start) {
			/* Too fast: leave slow start at the rate measured, plus one. */
			if (target + 1 < tp->snd_cwnd)
				tp->snd_cwnd = target + 1;
			if (tp->snd_cwnd < tp->snd_ssthresh)
				tp->snd_ssthresh = tp->snd_cwnd;
		} else if (in_slow_start) {
			tcp_slow_start(tp, acked);
		} else if (diff > BETA) {
			tp->snd_cwnd--;
			if (tp->snd_cwnd < tp->snd_ssthresh)
				tp->snd_ssthresh = tp->snd_cwnd;
		} else if (diff < ALPHA) {
			tp->snd_cwnd++;
		}
		if (tp->snd_cwnd < 2)
			tp->snd_cwnd = 2;
		else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
			tp->snd_cwnd = tp->snd_cwnd_clamp;
		/* tcp_current_ssthresh() outside a window reduction: at least 3/4 of cwnd. */
		three_quarters = (tp->snd_cwnd >> 1) + (tp->snd_cwnd >> 2);
		if (tp->snd_ssthresh < three_quarters)
			tp->snd_ssthresh = three_quarters;
	}
	v->rtt_count = 0;
	v->min_rtt_us = NO_RTT;
}

SEC("struct_ops")
__u32 BPF_PROG(vegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(vegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops vegas = {
	.init = (void *)vegas_init,
	.ssthresh = (void *)vegas_ssthresh,
	.undo_cwnd = (void *)vegas_undo_cwnd,
	.cong_avoid = (void *)vegas_cong_avoid,
	.pkts_acked = (void *)vegas_pkts_acked,
	.set_state = (void *)vegas_set_state,
	.cwnd_event = (void *)vegas_cwnd_event,
	.name = "vegas",
};
