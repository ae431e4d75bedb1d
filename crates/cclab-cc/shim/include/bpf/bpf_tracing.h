/* SPDX-License-Identifier: MIT */
/*
 * The simulator's stand-in for libbpf's bpf/bpf_tracing.h. In the kernel a struct_ops
 * program receives its arguments as an array of u64 (BPF_PROG unpacks them); built
 * natively, the function simply takes them, with the signature its tcp_congestion_ops
 * member declares, and bridge.c calls the member as TCP would.
 */
#ifndef __BPF_TRACING_H__
#define __BPF_TRACING_H__

#include "bpf_helpers.h" /* as libbpf's does */

#define BPF_PROG(name, args...) name(args)

#endif
