// SPDX-License-Identifier: MIT
/* Reno written in the older style: structs from a header beside the file, not vmlinux.h. */
#include "tcp_helpers.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/halving_ssthresh")
__u32 BPF_PROG(halving_ssthresh, struct sock *sk)
{
	__u32 half = tcp_sk(sk)->snd_cwnd >> 1;

	return half > 2 ? half : 2;
}

SEC("struct_ops/halving_cong_avoid")
void BPF_PROG(halving_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/halving_undo_cwnd")
__u32 BPF_PROG(halving_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops halving = {
	.ssthresh = (void *)halving_ssthresh,
	.cong_avoid = (void *)halving_cong_avoid,
	.undo_cwnd = (void *)halving_undo_cwnd,
	.name = "halving",
};

SEC(".struct_ops")
struct tcp_congestion_ops halving_spare = {
	.ssthresh = (void *)halving_ssthresh,
	.cong_avoid = (void *)halving_cong_avoid,
	.undo_cwnd = (void *)halving_undo_cwnd,
	.name = "halving_spare",
};
