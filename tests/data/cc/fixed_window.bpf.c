// SPDX-License-Identifier: MIT
/* A window held at FIXED_CWND packets whatever happens: its goodput is the window per RTT. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define FIXED_CWND 20

SEC("struct_ops")
void BPF_PROG(fixed_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tp->snd_cwnd = FIXED_CWND;
	tp->snd_ssthresh = FIXED_CWND;
}

SEC("struct_ops")
__u32 BPF_PROG(fixed_ssthresh, struct sock *sk)
{
	return FIXED_CWND;
}

SEC("struct_ops")
void BPF_PROG(fixed_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	((struct tcp_sock *)sk)->snd_cwnd = FIXED_CWND;
}

SEC("struct_ops")
__u32 BPF_PROG(fixed_undo_cwnd, struct sock *sk)
{
	return FIXED_CWND;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops fixed_window = {
	.init = (void *)fixed_init,
	.ssthresh = (void *)fixed_ssthresh,
	.cong_avoid = (void *)fixed_cong_avoid,
	.undo_cwnd = (void *)fixed_undo_cwnd,
	.name = "fixed_window",
};
