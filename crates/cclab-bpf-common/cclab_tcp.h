// SPDX-License-Identifier: MIT
/*
 * What the project's BPF struct_ops ports (crates/cclab-bpf-bbr, crates/cclab-bpf-l4s) take
 * from the kernel's headers that a BPF program cannot include: the accessors and helpers of
 * include/net/tcp.h, include/linux/jiffies.h and include/linux/minmax.h, one copy for all.
 * A port includes it after vmlinux.h and libbpf's headers, and after defining HZ if it uses
 * the jiffies helpers. Both the kernel engine's build and the simulator's (its shim) find it
 * by the relative path the ports include it with.
 */
#pragma once

/* include/net/tcp.h, include/net/inet_connection_sock.h */
static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

/* include/net/tcp.h: before()/after() on wrapping 32-bit counters. */
static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}
#define after(seq2, seq1) before(seq1, seq2)

/* tcp_packets_in_flight(): packets_out - (sacked_out + lost_out) + retrans_out. */
static __always_inline __u32 tcp_packets_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

/* tcp_stamp_us_delta(): t1 - t0 in us, never negative (max_t(s64, t1 - t0, 0) as a u32). */
static __always_inline __u32 tcp_stamp_us_delta(__u64 t1, __u64 t0)
{
	__s64 d = (__s64)(t1 - t0);

	return d > 0 ? (__u32)d : 0;
}

/* tcp_min_rtt(): the connection's windowed min RTT (tp->rtt_min's best). */
static __always_inline __u32 tcp_min_rtt(const struct tcp_sock *tp)
{
	return tp->rtt_min.s[0].v;
}

/* tcp_jiffies32: the low 32 bits of jiffies. */
static __always_inline __u32 tcp_jiffies32(void)
{
	return (__u32)bpf_jiffies64();
}

#ifdef HZ
/* include/linux/jiffies.h for a constant HZ. */
static __always_inline __u32 jiffies_to_msecs(__u32 j)
{
	return (__u32)((__u64)j * 1000 / HZ);
}

/* msecs_to_jiffies(): round up. */
static __always_inline __u32 msecs_to_jiffies(__u32 ms)
{
	if (1000 % HZ == 0)
		return (ms + (1000 / HZ) - 1) / (1000 / HZ);
	if (HZ % 1000 == 0)
		return ms * (HZ / 1000);
	return (__u32)(((__u64)ms * HZ + 999) / 1000);
}
#endif

/* get_random_u32_below(ceil): multiply-shift of a random u32. */
static __always_inline __u32 random_below(__u32 ceil)
{
	return (__u32)(((__u64)bpf_get_prandom_u32() * ceil) >> 32);
}

/* include/linux/minmax.h */
static __always_inline __u32 min_u32(__u32 a, __u32 b)
{
	return a < b ? a : b;
}

static __always_inline __u32 max_u32(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

static __always_inline __u32 min_not_zero_u32(__u32 a, __u32 b)
{
	return a == 0 ? b : (b == 0 ? a : min_u32(a, b));
}
