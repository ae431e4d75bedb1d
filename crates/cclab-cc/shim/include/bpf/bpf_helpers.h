/* SPDX-License-Identifier: MIT */
/*
 * The simulator's stand-in for libbpf's bpf/bpf_helpers.h, for building a BPF struct_ops
 * congestion control natively (crates/cclab-cc/src/native.rs). The macros keep their
 * meaning where it has one outside the kernel and vanish where it has none (sections,
 * kfunc and map annotations); the helpers a congestion control calls are functions of
 * bridge.c, which says what each returns in the simulator.
 */
#ifndef __BPF_HELPERS__
#define __BPF_HELPERS__

#ifndef NULL
#define NULL ((void *)0)
#endif

#define SEC(name)
#define __ksym
#define __kconfig
#define __weak __attribute__((weak))
#define __hidden
#define __always_inline inline __attribute__((always_inline))
#ifndef __noinline
#define __noinline __attribute__((noinline))
#endif
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name
#define __array(name, val) __typeof__(val) *name[]
#define __ulong(name, val) enum { ___bpf_concat(__unique_value, __COUNTER__) = val } name
#define ___bpf_concat(a, b) a##b
#define __stringify(x) #x
#define barrier() __asm__ __volatile__("" : : : "memory")
#define barrier_var(var) __asm__ __volatile__("" : "+r"(var))
#define bpf_printk(fmt, ...) ((void)0)

/* bridge.c */
unsigned long long bpf_ktime_get_ns(void);
unsigned long long bpf_jiffies64(void);
unsigned int bpf_get_prandom_u32(void);
void *bpf_map_lookup_elem(void *map, const void *key);
long bpf_map_update_elem(void *map, const void *key, const void *value, unsigned long long flags);
void *cclab_sk_storage_get(void *map, unsigned long value_bytes, void *sk, void *value, unsigned long long flags);
/* The map's value type gives the storage's size, as the kernel reads it from the map's BTF. */
#define bpf_sk_storage_get(map_, sk_, init_, flags_) cclab_sk_storage_get((map_), sizeof(*(map_)->value), (sk_), (init_), (flags_))
long bpf_sk_storage_delete(void *map, void *sk);
long bpf_setsockopt(void *bpf_socket, int level, int optname, void *optval, int optlen);
long bpf_getsockopt(void *bpf_socket, int level, int optname, void *optval, int optlen);
long bpf_tcp_send_ack(void *tp, unsigned int rcv_nxt);

#endif
