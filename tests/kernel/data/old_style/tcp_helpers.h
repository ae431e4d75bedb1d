/* SPDX-License-Identifier: MIT */
/*
 * The older style of BPF congestion controls (Linux's selftests before vmlinux.h, their
 * bpf_tcp_helpers.h): the kernel structs a CC reads, declared by hand with only the fields
 * it uses and relocated at load time by CO-RE (preserve_access_index).
 */
#ifndef TCP_HELPERS_H
#define TCP_HELPERS_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#define BPF_STRUCT_OPS(name, args...) SEC("struct_ops/" #name) BPF_PROG(name, args)

struct sock_common {
	unsigned char skc_state;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	__u64 icsk_ca_priv[104 / sizeof(__u64)];
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 snd_cwnd;
	__u32 snd_ssthresh;
	__u32 prior_cwnd;
} __attribute__((preserve_access_index));

static inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

struct rate_sample;
enum tcp_ca_event { CA_EVENT_TX_START };

struct tcp_congestion_ops {
	char name[16];
	__u32 flags;
	void (*init)(struct sock *sk);
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	__u32 (*undo_cwnd)(struct sock *sk);
	void *owner;
};

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

#endif
