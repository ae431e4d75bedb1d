/* SPDX-License-Identifier: MIT */
/*
 * The simulator's stand-in for libbpf's bpf/bpf_core_read.h. CO-RE relocates a field
 * access to the running kernel's layout; built natively against the simulator's vmlinux.h
 * the access is already right, so each read is the plain C expression.
 */
#ifndef __BPF_CORE_READ_H__
#define __BPF_CORE_READ_H__

#define bpf_core_field_exists(field) 1
#define bpf_core_type_exists(type) 1
#define bpf_core_enum_value_exists(type, value) 1
#define bpf_core_field_size(field) sizeof(field)
#define BPF_CORE_READ_BITFIELD(s, field) ((s)->field)
#define BPF_CORE_READ_BITFIELD_PROBED(s, field) ((s)->field)

#define ___cclab_nth(_1, _2, _3, _4, _5, _6, N, ...) N
#define ___cclab_chain(src, ...) ___cclab_nth(__VA_ARGS__, ___cclab_c6, ___cclab_c5, ___cclab_c4, ___cclab_c3, ___cclab_c2, ___cclab_c1)(src, __VA_ARGS__)
#define ___cclab_c1(s, a) (s)->a
#define ___cclab_c2(s, a, b) (s)->a->b
#define ___cclab_c3(s, a, b, c) (s)->a->b->c
#define ___cclab_c4(s, a, b, c, d) (s)->a->b->c->d
#define ___cclab_c5(s, a, b, c, d, e) (s)->a->b->c->d->e
#define ___cclab_c6(s, a, b, c, d, e, f) (s)->a->b->c->d->e->f

#define BPF_CORE_READ(src, ...) (___cclab_chain(src, __VA_ARGS__))
#define BPF_CORE_READ_INTO(dst, src, ...) ((*(dst) = ___cclab_chain(src, __VA_ARGS__)), 0)
#define bpf_core_read(dst, sz, src) (__builtin_memcpy((dst), (src), (sz)), 0)
#define bpf_probe_read_kernel(dst, sz, src) (__builtin_memcpy((dst), (src), (sz)), 0)

#endif
