// SPDX-License-Identifier: MIT
/* A congestion control with a bug the BPF verifier would have refused: it writes through a
 * NULL pointer on its first ACK. In the simulator it must fail its own run only. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

SEC("struct_ops")
__u32 BPF_PROG(crash_ssthresh, struct sock *sk)
{
	return 2;
}

SEC("struct_ops")
void BPF_PROG(crash_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	volatile __u32 *nowhere = (volatile __u32 *)0;

	*nowhere = acked;
}

SEC("struct_ops")
__u32 BPF_PROG(crash_undo_cwnd, struct sock *sk)
{
	return 2;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops crashes = {
	.ssthresh = (void *)crash_ssthresh,
	.cong_avoid = (void *)crash_cong_avoid,
	.undo_cwnd = (void *)crash_undo_cwnd,
	.name = "crashes",
};
