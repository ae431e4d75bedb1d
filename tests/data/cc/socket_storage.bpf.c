// SPDX-License-Identifier: MIT
/* Reno that keeps a count in BPF socket storage, as a CC whose state outgrows icsk_ca_priv
 * does (the project's BBRv3 port): init checks what bpf_sk_storage_get and
 * bpf_sk_storage_delete promise and sets a window of 0 (failing the run, naming the hook)
 * where they break it; cong_avoid counts its calls there and checks the count survives. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

struct calls {
	__u64 cong_avoid;
	__u64 last_delivered;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct calls);
} calls_of SEC(".maps");

SEC("struct_ops")
void BPF_PROG(storage_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct calls *c = bpf_sk_storage_get(&calls_of, sk, NULL, 0);

	/* Nothing before it is created; created zeroed; gone once deleted; created anew zeroed. */
	if (c)
		goto broken;
	c = bpf_sk_storage_get(&calls_of, sk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c || c->cong_avoid)
		goto broken;
	c->cong_avoid = 7;
	if (bpf_sk_storage_delete(&calls_of, sk) != 0 || bpf_sk_storage_get(&calls_of, sk, NULL, 0))
		goto broken;
	c = bpf_sk_storage_get(&calls_of, sk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c || c->cong_avoid)
		goto broken;
	return;
broken:
	tp->snd_cwnd = 0;
}

SEC("struct_ops")
void BPF_PROG(storage_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct calls *c = bpf_sk_storage_get(&calls_of, sk, NULL, 0);

	/* One call per ACK that grows the window, never more than the packets delivered. */
	if (!c || c->cong_avoid > tp->delivered) {
		tp->snd_cwnd = 0;
		return;
	}
	c->cong_avoid++;
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(storage_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(storage_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops socket_storage = {
	.init = (void *)storage_init,
	.ssthresh = (void *)storage_ssthresh,
	.cong_avoid = (void *)storage_cong_avoid,
	.undo_cwnd = (void *)storage_undo_cwnd,
	.name = "socket_storage",
};
