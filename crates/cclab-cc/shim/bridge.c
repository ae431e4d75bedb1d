/* SPDX-License-Identifier: MIT */
/*
 * The bridge between the simulator and a user's BPF struct_ops congestion control, built
 * natively with the source in one translation unit (python/cclab/engines/native_cc.py):
 *
 *     clang -O2 -shared -fPIC -I shim/include -DCCLAB_SOURCE='"FILE.bpf.c"' -DCCLAB_OPS=MAP bridge.c
 *
 * The simulator (crates/cclab-cc/src/native.rs) keeps one `struct cclab_sk` per flow and
 * calls each hook through cclab_cc_call: the TCP state it holds is written into the
 * kernel-shaped socket, the tcp_congestion_ops member runs as TCP would run it, and what a
 * congestion control may change (cwnd, its counter and clamp, ssthresh, prior_cwnd,
 * app_limited, the pacing rate and status) is read back. icsk_ca_priv stays in the socket
 * between calls, as in the kernel.
 *
 * Approximations, named (the simulator's TcpState has no more than this):
 * - lsndtime is the jiffy of the previous hook call (the simulator keeps no send time);
 * - tcp_min_rtt() (rtt_min) is srtt: the simulator hands its CCs no windowed minimum, and
 *   its own BBR reads srtt where tcp_bbr.c's init reads tcp_min_rtt(), both the handshake's
 *   one sample then;
 * - packets_out is the packets in flight; max_packets_out is chosen so that
 *   bpf_tracing_net.h's tcp_is_cwnd_limited() answers as the simulator's TCP does;
 * - sequence numbers are the segment counts times the MSS, from zero (no random ISN);
 * - cong_control's rs->prior_mstamp is now less the sample's interval (the simulator's rate
 *   sample keeps no send time), and only a nonzero flag where the interval was too short;
 * - cong_control's `flag` holds FLAG_DATA_ACKED when the sample acked or SACKed data and
 *   FLAG_ECE when the ACK echoed CE; in_ack_event's flags CA_ACK_ECE alike;
 * - maps: bpf_map_lookup_elem finds nothing and bpf_map_update_elem stores nothing (a
 *   verified program checks for NULL), but socket storage (bpf_sk_storage_get) holds a
 *   value per map and socket, for up to 4 maps; bpf_setsockopt and bpf_getsockopt fail;
 * - bpf_tcp_send_ack does nothing: the simulator's receiver already sends the ACKs of
 *   DCTCP's CE state machine for a TCP_CONG_NEEDS_ECN congestion control.
 */
#include CCLAB_SOURCE

#ifndef __VMLINUX_H__
#error "cclab-native: the simulator builds sources written against vmlinux.h; this one declares the kernel's structs itself (the older selftests' style with preserve_access_index), whose layout only the kernel engine can relocate"
#endif

#define CCLAB_ABI_VERSION 2

/* include/net/tcp.h */
#define CCLAB_FLAG_DATA_ACKED 0x04
#define CCLAB_FLAG_ECE 0x40
#define CCLAB_CA_ACK_ECE (1 << 2)

/* What the simulator holds of a connection (crates/cclab-cc/src/native.rs, CTcp). */
struct cclab_tcp {
	u64 now_ns;
	u64 delivered_mstamp_ns;
	u64 pacing_rate; /* bytes per second */
	u64 snd_nxt_segs;
	u64 snd_una_segs;
	u64 delivered;
	u64 delivered_ce;
	u64 lost;
	u64 app_limited;
	u64 next_send_time_ns; /* tp->tcp_wstamp_ns: when the next paced skb may leave */
	u32 mss_cache;
	u32 snd_cwnd;
	u32 snd_cwnd_cnt;
	u32 snd_cwnd_clamp;
	u32 snd_ssthresh;
	u32 prior_cwnd;
	u32 ca_state;
	u32 packets_in_flight;
	u32 srtt_us; /* smoothed RTT in us (the socket's srtt_us is 8 times it) */
	u32 is_cwnd_limited; /* tcp_is_cwnd_limited() */
	u32 is_cwnd_limited_raw; /* tp->is_cwnd_limited */
	u32 ecn_ok;
	u32 pacing_needed; /* out: sk_pacing_status == SK_PACING_NEEDED */
};

/* struct rate_sample as the simulator has it (native.rs, CRateSample). */
struct cclab_rs {
	s64 interval_us; /* -1: no valid sample */
	s64 rtt_us; /* -1: none */
	u64 prior_delivered;
	u64 delivered;
	u64 delivered_ce;
	u32 losses;
	u32 acked_sacked;
	u32 prior_in_flight;
	u32 is_app_limited;
	u32 is_retrans;
	u32 is_ack_delayed;
	u32 ece;
};

/* Socket-local storage (BPF_MAP_TYPE_SK_STORAGE): a value per map, as many maps as a
 * source is likely to define (the project's BBRv3 port keeps its state in one). */
#define CCLAB_SK_STORAGE_MAPS 4

struct cclab_sk {
	struct tcp_sock tp; /* first: sk, icsk and tp share one address, as in the kernel */
	struct {
		void *map;
		void *value;
	} storage[CCLAB_SK_STORAGE_MAPS];
	u64 now_ns;
	u64 rng[4]; /* xoshiro256**, as crates/cclab-cc/src/rng.rs SimRng */
	u32 is_cwnd_limited;
	u32 last_call_jiffies;
};

/* The network namespace every socket is in: Linux's sysctl defaults (tcp_min_tso_segs 2). */
static struct net cclab_net = { .ipv4 = { .sysctl_tcp_min_tso_segs = 2 } };

/* CONFIG_HZ of the kernel the simulator models (crates/cclab-cc/src/cubic.rs DEFAULT_HZ:
 * Linux's default and this machine's 6.18); a source's `extern ... CONFIG_HZ __kconfig`
 * reads it, and jiffies tick at it. */
#define CCLAB_HZ 250
unsigned long CONFIG_HZ = CCLAB_HZ;

static u32 cclab_jiffies(u64 now_ns)
{
	return (u32)(now_ns / (1000000000ull / CCLAB_HZ));
}

static _Thread_local struct cclab_sk *cclab_current;

static void cclab_sync_in(struct cclab_sk *w, const struct cclab_tcp *t)
{
	struct tcp_sock *tp = &w->tp;
	struct sock *sk = (struct sock *)tp;
	u32 mss = t->mss_cache;

	w->now_ns = t->now_ns;
	w->is_cwnd_limited = t->is_cwnd_limited;
	tp->tcp_clock_cache = t->now_ns;
	tp->tcp_mstamp = t->now_ns / 1000;
	tp->tcp_wstamp_ns = t->next_send_time_ns;
	tp->delivered_mstamp = t->delivered_mstamp_ns / 1000;
	tp->mss_cache = mss;
	tp->snd_cwnd = t->snd_cwnd;
	tp->snd_cwnd_cnt = t->snd_cwnd_cnt;
	tp->snd_cwnd_clamp = t->snd_cwnd_clamp;
	tp->snd_ssthresh = t->snd_ssthresh;
	tp->prior_cwnd = t->prior_cwnd;
	tp->snd_nxt = (u32)(t->snd_nxt_segs * mss);
	tp->snd_una = (u32)(t->snd_una_segs * mss);
	tp->srtt_us = t->srtt_us << 3;
	tp->rtt_min.s[0].v = t->srtt_us ? t->srtt_us : ~0U;
	tp->packets_out = t->packets_in_flight;
	tp->delivered = (u32)t->delivered;
	tp->delivered_ce = (u32)t->delivered_ce;
	tp->lost = (u32)t->lost;
	tp->app_limited = (u32)t->app_limited;
	tp->ecn_flags = t->ecn_ok ? 1 /* TCP_ECN_OK */ : 0;
	tp->is_cwnd_limited = t->is_cwnd_limited_raw ? 1 : 0;
	/* tcp_is_cwnd_limited(): in slow start, cwnd < 2 x max_packets_out. */
	if (t->snd_cwnd < t->snd_ssthresh)
		tp->max_packets_out = t->is_cwnd_limited ? t->snd_cwnd : t->snd_cwnd / 2;
	else
		tp->max_packets_out = t->packets_in_flight;
	tp->inet_conn.icsk_ca_state = t->ca_state;
	/* The jiffy of the previous call (an ACK's, mostly): the simulator's TCP keeps no send
	 * time, as crates/cclab-cc/src/cubic.rs takes the last ACK for TxStart. */
	tp->lsndtime = w->last_call_jiffies;
	w->last_call_jiffies = cclab_jiffies(t->now_ns);
	sk->sk_pacing_rate = t->pacing_rate;
}

static void cclab_sync_out(const struct cclab_sk *w, struct cclab_tcp *t)
{
	const struct tcp_sock *tp = &w->tp;
	const struct sock *sk = (const struct sock *)tp;

	t->snd_cwnd = tp->snd_cwnd;
	t->snd_cwnd_cnt = tp->snd_cwnd_cnt;
	t->snd_cwnd_clamp = tp->snd_cwnd_clamp;
	t->snd_ssthresh = tp->snd_ssthresh;
	t->prior_cwnd = tp->prior_cwnd;
	t->app_limited = tp->app_limited;
	t->pacing_rate = sk->sk_pacing_rate;
	t->pacing_needed = sk->sk_pacing_status == SK_PACING_NEEDED;
}

/* Linux's kfuncs for BPF congestion controls (net/ipv4/tcp_cong.c, bpf_tcp_ca.c). */

u32 tcp_slow_start(struct tcp_sock *tp, u32 acked)
{
	u32 cwnd = tp->snd_cwnd + acked < tp->snd_ssthresh ? tp->snd_cwnd + acked : tp->snd_ssthresh;

	acked -= cwnd - tp->snd_cwnd;
	tp->snd_cwnd = cwnd < tp->snd_cwnd_clamp ? cwnd : tp->snd_cwnd_clamp;
	return acked;
}

void tcp_cong_avoid_ai(struct tcp_sock *tp, u32 w, u32 acked)
{
	/* If credits accumulated at a higher w, apply them gently now. */
	if (tp->snd_cwnd_cnt >= w) {
		tp->snd_cwnd_cnt = 0;
		tp->snd_cwnd++;
	}
	tp->snd_cwnd_cnt += acked;
	if (tp->snd_cwnd_cnt >= w) {
		u32 delta = tp->snd_cwnd_cnt / w;

		tp->snd_cwnd_cnt -= delta * w;
		tp->snd_cwnd += delta;
	}
	if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		tp->snd_cwnd = tp->snd_cwnd_clamp;
}

void tcp_reno_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	(void)ack;
	/* tcp_is_cwnd_limited() as the simulator's TCP computed it. */
	if (!((struct cclab_sk *)sk)->is_cwnd_limited)
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
}

u32 tcp_reno_ssthresh(struct sock *sk)
{
	u32 half = ((struct tcp_sock *)sk)->snd_cwnd >> 1;

	return half > 2 ? half : 2;
}

u32 tcp_reno_undo_cwnd(struct sock *sk)
{
	const struct tcp_sock *tp = (const struct tcp_sock *)sk;

	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

/* BPF helpers (bpf/bpf_helpers.h), from the simulator's clock and seeded randomness. */

long bpf_tcp_send_ack(void *tp, unsigned int rcv_nxt)
{
	(void)tp;
	(void)rcv_nxt;
	return 0;
}

unsigned long long bpf_ktime_get_ns(void)
{
	return cclab_current ? cclab_current->now_ns : 0;
}

unsigned long long bpf_jiffies64(void)
{
	return bpf_ktime_get_ns() / (1000000000ull / CCLAB_HZ);
}

/* crates/cclab-cc/src/rng.rs SimRng: xoshiro256**, seeded by SplitMix64 from the flow's CC
 * seed, so a source draws the numbers a built-in CC of the same seed draws (BBR's first
 * PROBE_BW phase, get_random_u32_below(): the top 32 bits times the bound). */
static u64 cclab_splitmix(u64 *x)
{
	u64 z = (*x += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static u64 cclab_rotl(u64 x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static u64 cclab_next_u64(u64 *s)
{
	u64 result = cclab_rotl(s[1] * 5, 7) * 9;
	u64 t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = cclab_rotl(s[3], 45);
	return result;
}

unsigned int bpf_get_prandom_u32(void)
{
	if (!cclab_current)
		return 0;
	return (unsigned int)(cclab_next_u64(cclab_current->rng) >> 32);
}

void *bpf_map_lookup_elem(void *map, const void *key)
{
	(void)map;
	(void)key;
	return NULL;
}

long bpf_map_update_elem(void *map, const void *key, const void *value, unsigned long long flags)
{
	(void)map;
	(void)key;
	(void)value;
	(void)flags;
	return -95; /* -EOPNOTSUPP */
}

/* bpf_sk_storage_get(): the socket's value for `map`, created (zeroed, or a copy of `value`)
 * with BPF_SK_STORAGE_GET_F_CREATE; NULL when absent otherwise, or past CCLAB_SK_STORAGE_MAPS. */
void *cclab_sk_storage_get(void *map, unsigned long value_bytes, void *sk, void *value, unsigned long long flags)
{
	struct cclab_sk *w = (struct cclab_sk *)sk;
	int i;

	for (i = 0; i < CCLAB_SK_STORAGE_MAPS && w->storage[i].map; i++)
		if (w->storage[i].map == map)
			return w->storage[i].value;
	if (!(flags & 1 /* BPF_SK_STORAGE_GET_F_CREATE */) || i == CCLAB_SK_STORAGE_MAPS)
		return NULL;
	w->storage[i].value = __builtin_calloc(1, value_bytes);
	if (!w->storage[i].value)
		return NULL;
	if (value)
		__builtin_memcpy(w->storage[i].value, value, value_bytes);
	w->storage[i].map = map;
	return w->storage[i].value;
}

/* bpf_sk_storage_delete(): the socket's value for `map` gone; -ENOENT if it had none. */
long bpf_sk_storage_delete(void *map, void *sk)
{
	struct cclab_sk *w = (struct cclab_sk *)sk;

	for (int i = 0; i < CCLAB_SK_STORAGE_MAPS && w->storage[i].map; i++) {
		if (w->storage[i].map != map)
			continue;
		__builtin_free(w->storage[i].value);
		/* Keep the table packed: the last slot in use takes this one's place. */
		int last = i;
		while (last + 1 < CCLAB_SK_STORAGE_MAPS && w->storage[last + 1].map)
			last++;
		w->storage[i] = w->storage[last];
		w->storage[last].map = NULL;
		w->storage[last].value = NULL;
		return 0;
	}
	return -2; /* -ENOENT */
}

long bpf_setsockopt(void *bpf_socket, int level, int optname, void *optval, int optlen)
{
	(void)bpf_socket;
	(void)level;
	(void)optname;
	(void)optval;
	(void)optlen;
	return -95;
}

long bpf_getsockopt(void *bpf_socket, int level, int optname, void *optval, int optlen)
{
	return bpf_setsockopt(bpf_socket, level, optname, optval, optlen);
}

/* The simulator's entry points. */

/* rs->prior_mstamp, the sampled packet's delivered_mstamp in us: now less the sample's
 * interval (the longer of its send and ACK intervals, so exact when ACKs set it), or now when
 * tcp_rate_gen found the interval too short to use; never 0, which means no sample. */
static u64 cclab_prior_mstamp_us(u64 now_ns, s64 interval_us)
{
	u64 now_us = now_ns / 1000;

	if (interval_us > 0 && (u64)interval_us < now_us)
		now_us -= (u64)interval_us;
	return now_us ? now_us : 1;
}

enum cclab_op {
	CCLAB_OP_INIT,
	CCLAB_OP_RELEASE,
	CCLAB_OP_SSTHRESH,
	CCLAB_OP_CONG_AVOID,
	CCLAB_OP_SET_STATE,
	CCLAB_OP_CWND_EVENT,
	CCLAB_OP_IN_ACK_EVENT,
	CCLAB_OP_PKTS_ACKED,
	CCLAB_OP_MIN_TSO_SEGS,
	CCLAB_OP_CONG_CONTROL,
	CCLAB_OP_UNDO_CWND,
	CCLAB_OP_SNDBUF_EXPAND,
};

__attribute__((visibility("default"))) u32 cclab_cc_abi(void)
{
	return CCLAB_ABI_VERSION;
}

/* Bit `op` set: the map fills that member. */
__attribute__((visibility("default"))) u32 cclab_cc_ops(void)
{
	const struct tcp_congestion_ops *o = &CCLAB_OPS;

	return (o->init ? 1u << CCLAB_OP_INIT : 0) | (o->release ? 1u << CCLAB_OP_RELEASE : 0) |
	       (o->ssthresh ? 1u << CCLAB_OP_SSTHRESH : 0) | (o->cong_avoid ? 1u << CCLAB_OP_CONG_AVOID : 0) |
	       (o->set_state ? 1u << CCLAB_OP_SET_STATE : 0) | (o->cwnd_event ? 1u << CCLAB_OP_CWND_EVENT : 0) |
	       (o->in_ack_event ? 1u << CCLAB_OP_IN_ACK_EVENT : 0) | (o->pkts_acked ? 1u << CCLAB_OP_PKTS_ACKED : 0) |
	       (o->min_tso_segs ? 1u << CCLAB_OP_MIN_TSO_SEGS : 0) | (o->cong_control ? 1u << CCLAB_OP_CONG_CONTROL : 0) |
	       (o->undo_cwnd ? 1u << CCLAB_OP_UNDO_CWND : 0) | (o->sndbuf_expand ? 1u << CCLAB_OP_SNDBUF_EXPAND : 0);
}

__attribute__((visibility("default"))) u32 cclab_cc_flags(void)
{
	return CCLAB_OPS.flags;
}

__attribute__((visibility("default"))) void *cclab_cc_new(u64 seed)
{
	struct cclab_sk *w = __builtin_calloc(1, sizeof(*w));

	if (w) {
		struct sock *sk = (struct sock *)&w->tp;
		u64 x = seed;

		for (int i = 0; i < 4; i++)
			w->rng[i] = cclab_splitmix(&x);
		/* sock_init_data / tcp_init_sock: no cap on the pacing rate, a pacing shift of 10
		 * (about 1 ms of data per skb), Linux's legacy GSO limits. */
		sk->sk_max_pacing_rate = ~0UL;
		sk->sk_pacing_shift = 10;
		sk->sk_gso_max_size = 65536;
		sk->sk_gso_max_segs = 65535;
		sk->__sk_common.skc_net.net = &cclab_net;
	}
	return w;
}

__attribute__((visibility("default"))) void cclab_cc_free(void *handle)
{
	struct cclab_sk *w = handle;

	for (int i = 0; w && i < CCLAB_SK_STORAGE_MAPS; i++)
		__builtin_free(w->storage[i].value);
	__builtin_free(w);
}

__attribute__((visibility("default"))) u64 cclab_cc_call(void *handle, struct cclab_tcp *t, u32 op, u64 a, u64 b, const void *sample)
{
	struct cclab_sk *w = handle;
	struct sock *sk = (struct sock *)&w->tp;
	const struct tcp_congestion_ops *o = &CCLAB_OPS;
	u64 ret = 0;
	u32 last_call_jiffies = w->last_call_jiffies;

	cclab_sync_in(w, t);
	/* A query (min_tso_segs, sndbuf_expand) is no call TCP makes on an ACK: lsndtime's
	 * stand-in stays the previous hook's. */
	if (op == CCLAB_OP_MIN_TSO_SEGS || op == CCLAB_OP_SNDBUF_EXPAND)
		w->last_call_jiffies = last_call_jiffies;
	cclab_current = w;
	switch (op) {
	case CCLAB_OP_INIT:
		if (o->init)
			o->init(sk);
		break;
	case CCLAB_OP_RELEASE:
		if (o->release)
			o->release(sk);
		break;
	case CCLAB_OP_SSTHRESH:
		ret = o->ssthresh(sk);
		break;
	case CCLAB_OP_CONG_AVOID:
		/* the ACK's sequence number: `a` segments */
		o->cong_avoid(sk, (u32)(a * t->mss_cache), (u32)b);
		break;
	case CCLAB_OP_SET_STATE:
		if (o->set_state)
			o->set_state(sk, (u8)a);
		break;
	case CCLAB_OP_CWND_EVENT:
		if (o->cwnd_event)
			o->cwnd_event(sk, (enum tcp_ca_event)a);
		break;
	case CCLAB_OP_IN_ACK_EVENT:
		if (o->in_ack_event)
			o->in_ack_event(sk, a ? CCLAB_CA_ACK_ECE : 0);
		break;
	case CCLAB_OP_PKTS_ACKED:
		if (o->pkts_acked) {
			const u64 *s = sample; /* pkts_acked, rtt_us (-1: none), in_flight */
			struct ack_sample as = { .pkts_acked = (u32)s[0], .rtt_us = (s32)(s64)s[1], .in_flight = (u32)s[2] };

			o->pkts_acked(sk, &as);
		}
		break;
	case CCLAB_OP_MIN_TSO_SEGS:
		ret = o->min_tso_segs ? o->min_tso_segs(sk) : 0;
		break;
	case CCLAB_OP_CONG_CONTROL: {
		const struct cclab_rs *r = sample;
		/* A sample has a sampled packet (tcp_rate_gen: prior_mstamp set, delivered counting it,
		 * so at least 1); without one, Linux reports delivered and interval_us as -1. */
		int sampled = r->delivered > 0;
		struct rate_sample rs = {
			.prior_mstamp = sampled ? cclab_prior_mstamp_us(t->now_ns, r->interval_us) : 0,
			.prior_delivered = (u32)r->prior_delivered,
			.delivered = sampled ? (s32)r->delivered : -1,
			.delivered_ce = (s32)r->delivered_ce,
			.interval_us = r->interval_us,
			.rtt_us = r->rtt_us,
			.losses = (int)r->losses,
			.acked_sacked = r->acked_sacked,
			.prior_in_flight = r->prior_in_flight,
			.is_app_limited = r->is_app_limited != 0,
			.is_retrans = r->is_retrans != 0,
			.is_ack_delayed = r->is_ack_delayed != 0,
		};
		int flag = (r->acked_sacked ? CCLAB_FLAG_DATA_ACKED : 0) | (r->ece ? CCLAB_FLAG_ECE : 0);

		o->cong_control(sk, (u32)(a * t->mss_cache), flag, &rs);
		break;
	}
	case CCLAB_OP_UNDO_CWND:
		ret = o->undo_cwnd ? o->undo_cwnd(sk) : tcp_reno_undo_cwnd(sk);
		break;
	case CCLAB_OP_SNDBUF_EXPAND:
		ret = o->sndbuf_expand ? o->sndbuf_expand(sk) : 0;
		break;
	}
	cclab_current = 0;
	cclab_sync_out(w, t);
	return ret;
}
