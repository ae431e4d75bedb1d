// SPDX-License-Identifier: MIT
/*
 * An example of a congestion control of your own, written as Linux's BPF selftests write
 * them (tools/testing/selftests/bpf/progs/bpf_cc_cubic.c and friends): Reno's slow start and
 * additive increase, but the multiplicative decrease of CUBIC (beta = 0.7, RFC 9438) instead
 * of Reno's 0.5. Use it from a spec with
 *
 *     [[flows]]
 *     cc = "cc/reno_beta07.bpf.c"      # relative to the spec file
 *
 * The kernel engine builds it with clang against the running kernel's BTF (vmlinux.h) and
 * registers it for the run under a name of its own; the simulator builds it natively with
 * cclab's shim. `cclab cc check` shows what it calls and where each engine has it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

/* The kernel's own Reno pieces, exported to BPF congestion controls as kfuncs. */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

#define BETA_SCALE 1024
#define BETA 717 /* 0.7 x 1024, as tcp_cubic.c's beta */

struct reno_beta {
	__u32 loss_cwnd; /* the window before the last reduction, for undo */
};

static __always_inline struct reno_beta *ca_of(struct sock *sk)
{
	return (struct reno_beta *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

SEC("struct_ops")
void BPF_PROG(reno_beta_init, struct sock *sk)
{
	ca_of(sk)->loss_cwnd = 0;
}

SEC("struct_ops")
__u32 BPF_PROG(reno_beta_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 target = tp->snd_cwnd * BETA / BETA_SCALE;

	ca_of(sk)->loss_cwnd = tp->snd_cwnd;
	return target > 2 ? target : 2;
}

SEC("struct_ops")
void BPF_PROG(reno_beta_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(reno_beta_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 before = ca_of(sk)->loss_cwnd;

	return tp->snd_cwnd > before ? tp->snd_cwnd : before;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops reno_beta07 = {
	.init = (void *)reno_beta_init,
	.ssthresh = (void *)reno_beta_ssthresh,
	.cong_avoid = (void *)reno_beta_cong_avoid,
	.undo_cwnd = (void *)reno_beta_undo_cwnd,
	.name = "reno_beta07",
};
