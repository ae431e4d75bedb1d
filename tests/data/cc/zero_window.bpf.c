// SPDX-License-Identifier: MIT
/* A congestion control that sets its window to 0 once it passes 40 packets. Linux's TCP sends
 * nothing while it is 0, and the ACKs of what is in flight grow it again through slow start (on
 * the kernel engine: a 0-40 sawtooth, 16 of 19 Mbit/s at 20 Mbit/s, 20 ms, no timeout); the
 * simulator does not model a window of 0 and fails the run naming the hook. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

SEC("struct_ops")
__u32 BPF_PROG(zero_ssthresh, struct sock *sk)
{
	return 2;
}

SEC("struct_ops")
void BPF_PROG(zero_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tcp_reno_cong_avoid(sk, ack, acked);
	if (tp->snd_cwnd > 40)
		tp->snd_cwnd = 0;
}

SEC("struct_ops")
__u32 BPF_PROG(zero_undo_cwnd, struct sock *sk)
{
	return 2;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops zero_window = {
	.ssthresh = (void *)zero_ssthresh,
	.cong_avoid = (void *)zero_cong_avoid,
	.undo_cwnd = (void *)zero_undo_cwnd,
	.name = "zero_window",
};
