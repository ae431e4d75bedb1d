/* SPDX-License-Identifier: MIT */
/*
 * The simulator's vmlinux.h: the kernel types a BPF struct_ops congestion control reads,
 * for building a user's source natively into the simulator (crates/cclab-cc/src/native.rs).
 * On the kernel engine the same source is built against the running kernel's own vmlinux.h
 * (bpftool's dump of its BTF).
 *
 * The names, types and meanings are Linux 6.18's (include/linux/tcp.h, include/net/sock.h,
 * include/net/inet_connection_sock.h, include/net/tcp.h); the field set is the part of
 * those structs a congestion control uses, and the order is not the kernel's: a source
 * that names its fields, as every BPF program must, reads the same values here as there.
 * Which values the simulator fills, and how, is in bridge.c.
 */
#ifndef __VMLINUX_H__
#define __VMLINUX_H__

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __s8 s8;
typedef __u8 u8;
typedef __s16 s16;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef _Bool bool;
typedef unsigned long size_t;
enum { false = 0, true = 1 };

/* include/net/inet_connection_sock.h: enum tcp_ca_state, include/net/tcp.h: tcp_ca_event. */
enum tcp_ca_state {
	TCP_CA_Open = 0,
	TCP_CA_Disorder = 1,
	TCP_CA_CWR = 2,
	TCP_CA_Recovery = 3,
	TCP_CA_Loss = 4,
};

enum tcp_ca_event {
	CA_EVENT_TX_START = 0,
	CA_EVENT_CWND_RESTART = 1,
	CA_EVENT_COMPLETE_CWR = 2,
	CA_EVENT_LOSS = 3,
	CA_EVENT_ECN_NO_CE = 4,
	CA_EVENT_ECN_IS_CE = 5,
};

/* include/uapi/linux/bpf.h: what a map definition names. */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_SK_STORAGE = 24,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
	BPF_SK_STORAGE_GET_F_CREATE = 1,
};

/* Map flags (a map definition's map_flags). */
enum {
	BPF_F_NO_PREALLOC = 1,
};

/* include/net/sock.h: enum sk_pacing. */
enum sk_pacing {
	SK_PACING_NONE = 0,
	SK_PACING_NEEDED = 1,
	SK_PACING_FQ = 2,
};

/* include/net/tcp_states.h */
enum {
	TCP_ESTABLISHED = 1,
	TCP_SYN_SENT = 2,
	TCP_SYN_RECV = 3,
	TCP_FIN_WAIT1 = 4,
	TCP_FIN_WAIT2 = 5,
	TCP_TIME_WAIT = 6,
	TCP_CLOSE = 7,
	TCP_CLOSE_WAIT = 8,
	TCP_LAST_ACK = 9,
	TCP_LISTEN = 10,
	TCP_CLOSING = 11,
};

/* include/net/inet_connection_sock.h: enum inet_csk_ack_state_t. */
enum inet_csk_ack_state_t {
	ICSK_ACK_SCHED = 1,
	ICSK_ACK_TIMER = 2,
	ICSK_ACK_PUSHED = 4,
	ICSK_ACK_PUSHED2 = 8,
	ICSK_ACK_NOW = 16,
	ICSK_ACK_NOMEM = 32,
};

/* include/net/netns/ipv4.h, include/net/net_namespace.h: the sysctls a CC reads. */
struct netns_ipv4 {
	u8 sysctl_tcp_min_tso_segs;
};

struct net {
	struct netns_ipv4 ipv4;
};

typedef struct {
	struct net *net;
} possible_net_t;

struct sock_common {
	unsigned char skc_state;
	unsigned short skc_family;
	possible_net_t skc_net;
};

struct sock {
	struct sock_common __sk_common;
	u32 sk_pacing_status; /* enum sk_pacing */
	unsigned long sk_pacing_rate; /* bytes per second */
	unsigned long sk_max_pacing_rate;
	u16 sk_gso_max_segs;
	unsigned int sk_gso_max_size;
	u8 sk_pacing_shift;
};

struct inet_sock {
	struct sock sk;
};

struct inet_connection_sock {
	struct inet_sock icsk_inet;
	__u8 icsk_ca_state: 5;
	__u8 icsk_ca_initialized: 1;
	__u8 icsk_ca_setsockopt: 1;
	__u8 icsk_ca_dst_locked: 1;
	struct {
		__u8 pending; /* ICSK_ACK_*: nothing pends in the simulator, whose receiver acks itself */
		__u8 quick;
		__u8 pingpong;
		__u32 ato;
		__u32 lrcvtime;
		__u16 last_seg_size;
		__u16 rcv_mss;
	} icsk_ack;
	/* ICSK_CA_PRIV_SIZE: 13 x u64 since Linux 6.0. */
	u64 icsk_ca_priv[13];
};

/* include/linux/win_minmax.h */
struct minmax_sample {
	u32 t;
	u32 v;
};

struct minmax {
	struct minmax_sample s[3];
};

struct tcp_sock {
	struct inet_connection_sock inet_conn;
	u32 mss_cache;
	u32 snd_cwnd;
	u32 snd_cwnd_cnt;
	u32 snd_cwnd_clamp;
	u32 snd_cwnd_used;
	u32 snd_cwnd_stamp;
	u32 snd_ssthresh;
	u32 prior_cwnd;
	u32 prior_ssthresh;
	u32 snd_una;
	u32 snd_nxt;
	u32 rcv_nxt;
	u32 high_seq;
	u32 srtt_us; /* smoothed RTT << 3, in us */
	struct minmax rtt_min; /* tcp_min_rtt() reads s[0].v, in us */
	u32 mdev_us;
	u32 packets_out;
	u32 retrans_out;
	u32 sacked_out;
	u32 lost_out;
	u32 max_packets_out;
	u32 delivered;
	u32 delivered_ce;
	u32 lost;
	u32 app_limited;
	u32 data_segs_out;
	u32 lsndtime;
	u32 window_clamp;
	u64 tcp_mstamp; /* us */
	u64 tcp_clock_cache; /* ns */
	u64 tcp_wstamp_ns;
	u64 delivered_mstamp; /* us */
	u64 bytes_acked;
	u8 ecn_flags;
	u8 is_cwnd_limited: 1;
	u8 rate_app_limited: 1;
};

/* include/net/tcp.h */
struct ack_sample {
	u32 pkts_acked;
	s32 rtt_us;
	u32 in_flight;
};

struct rate_sample {
	u64 prior_mstamp;
	u32 prior_delivered;
	u32 prior_delivered_ce;
	s32 delivered;
	s32 delivered_ce;
	long interval_us;
	u32 snd_interval_us;
	u32 rcv_interval_us;
	long rtt_us;
	int losses;
	u32 acked_sacked;
	u32 prior_in_flight;
	u32 last_end_seq;
	bool is_app_limited;
	bool is_retrans;
	bool is_ack_delayed;
};

union tcp_cc_info;
struct module;

struct tcp_congestion_ops {
	u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, u32 ack, u32 acked);
	void (*set_state)(struct sock *sk, u8 new_state);
	void (*cwnd_event)(struct sock *sk, enum tcp_ca_event ev);
	void (*in_ack_event)(struct sock *sk, u32 flags);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	u32 (*min_tso_segs)(struct sock *sk);
	void (*cong_control)(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs);
	u32 (*undo_cwnd)(struct sock *sk);
	u32 (*sndbuf_expand)(struct sock *sk);
	size_t (*get_info)(struct sock *sk, u32 ext, int *attr, union tcp_cc_info *info);
	char name[16];
	struct module *owner;
	u32 key;
	u32 flags;
	void (*init)(struct sock *sk);
	void (*release)(struct sock *sk);
};

#endif /* __VMLINUX_H__ */
