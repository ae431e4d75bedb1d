// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's BBRv1 state at every segment a BBR socket receives: `struct bbr`
 * (net/ipv4/tcp_bbr.c) as bbr_main() left it after the previous ACK, which
 * tcp_info and INET_DIAG_BBRINFO do not show (extra_acked, full_bw and its count,
 * the round counter, the gain-cycle index). bench/kernel_bbr_trace.py loads it.
 *
 * Attached to the tcp:tcp_probe raw tracepoint (tcp_rcv_established), because this
 * kernel has neither kprobes nor fentry trampolines. Records go to an array map;
 * the loader reads the first `count` entries after the run.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define MAX_RECORDS 262144

/* Keep in step with RECORD in kernel_bbr_trace.py. */
struct record {
	__u64 t_ns;
	__u32 saddr;      /* network byte order: the sender namespace's address names the flow */
	__u32 cwnd;
	__u32 bits;       /* mode 0-2, round_start 3, full_bw_reached 4, full_bw_cnt 5-6, cycle_idx 7-9,
			   * extra_acked_win_idx 10, extra_acked_win_rtts 11-15, packet_conservation 16,
			   * prev_ca_state 17-19 */
	__u32 full_bw;    /* packets/us << 24, as bw */
	__u32 bw;         /* the max filter's best sample */
	__u32 min_rtt_us;
	__u16 extra_acked[2];
	__u32 rtt_cnt;
	__u32 delivered;
	__u32 in_flight;  /* tcp_packets_in_flight() */
	__u32 pacing_rate_kbps;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_RECORDS);
	__type(key, __u32);
	__type(value, struct record);
} records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} count SEC(".maps");

SEC("raw_tp/tcp_probe")
int BPF_PROG(bbr_state, struct sock *sk, struct sk_buff *skb)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	const struct tcp_congestion_ops *ops = BPF_CORE_READ(icsk, icsk_ca_ops);
	char name[8] = {};
	struct bbr b = {};
	struct record *r;
	__u32 zero = 0, i, *n;

	bpf_probe_read_kernel_str(name, sizeof(name), &ops->name);
	if (name[0] != 'b' || name[1] != 'b' || name[2] != 'r' || name[3] != 0)
		return 0; /* only mainline BBRv1 ("bbr") has this struct bbr */
	n = bpf_map_lookup_elem(&count, &zero);
	if (!n)
		return 0;
	i = __sync_fetch_and_add(n, 1);
	r = bpf_map_lookup_elem(&records, &i);
	if (!r)
		return 0; /* full: the loader reports the overflow from count */
	bpf_probe_read_kernel(&b, sizeof(b), &icsk->icsk_ca_priv);
	r->t_ns = bpf_ktime_get_ns();
	r->saddr = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
	r->cwnd = BPF_CORE_READ(tp, snd_cwnd);
	r->bits = b.mode | b.round_start << 3 | b.full_bw_reached << 4 | b.full_bw_cnt << 5 | b.cycle_idx << 7 |
		  b.extra_acked_win_idx << 10 | b.extra_acked_win_rtts << 11 | b.packet_conservation << 16 |
		  b.prev_ca_state << 17;
	r->full_bw = b.full_bw;
	r->bw = b.bw.s[0].v;
	r->min_rtt_us = b.min_rtt_us;
	r->extra_acked[0] = b.extra_acked[0];
	r->extra_acked[1] = b.extra_acked[1];
	r->rtt_cnt = b.rtt_cnt;
	r->delivered = BPF_CORE_READ(tp, delivered);
	r->in_flight = BPF_CORE_READ(tp, packets_out) - BPF_CORE_READ(tp, sacked_out) - BPF_CORE_READ(tp, lost_out) +
		       BPF_CORE_READ(tp, retrans_out);
	r->pacing_rate_kbps = BPF_CORE_READ(sk, sk_pacing_rate) / 125;
	return 0;
}
