// SPDX-License-Identifier: MIT
/* Linux's Reno (net/ipv4/tcp_cong.c: tcp_reno_ssthresh, tcp_reno_cong_avoid, tcp_reno_undo_cwnd)
 * as a BPF struct_ops source: the simulator's built-in Reno is the same algorithm. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops")
__u32 BPF_PROG(reno_src_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(reno_src_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(reno_src_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops reno_src = {
	.ssthresh = (void *)reno_src_ssthresh,
	.cong_avoid = (void *)reno_src_cong_avoid,
	.undo_cwnd = (void *)reno_src_undo_cwnd,
	.name = "reno_src",
};
