"""A user's congestion control from its BPF C source, built natively for the simulator.

The kernel engine compiles the source for the kernel (kernel/user_cc.py); the simulator
compiles the same file into a shared library with the shim in crates/cclab-cc/shim, whose
vmlinux.h and libbpf stand-ins make it plain C and whose bridge.c runs the map's hooks
against the simulator's TCP (crates/cclab-cc/src/native.rs loads it). The library is cached
by the source's hash, the map and the shim's hash. A run with one runs in a child process
(`python -m cclab.engines.sim_child`): a congestion control that crashes fails its run only.

The shim builds sources written against vmlinux.h, the style of today's selftests; the older
style, which declares the kernel's structs itself and relies on CO-RE to relocate them, runs
on the kernel engine only (bridge.c refuses it in one line).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from cclab.engines.base import cache_root
from cclab.errors import SpecError

SHIM_DIR = Path(__file__).resolve().parents[3] / "crates" / "cclab-cc" / "shim"
#: bridge.c's own refusal (the older style), reported before the compiler's other errors.
SHIM_ERROR = re.compile(r"error: \"?(cclab-native: [^\"]*)")
COMPILER_ERROR = re.compile(r"^(?:.*/)?([^/:]+:\d+:\d+: (?:fatal )?error: .*)$", re.MULTILINE)


#: The kfuncs bridge.c implements (Linux's net/ipv4/tcp_cong.c, exported to BPF CCs).
SHIM_KFUNCS = frozenset({"tcp_reno_cong_avoid", "tcp_reno_ssthresh", "tcp_reno_undo_cwnd", "tcp_slow_start", "tcp_cong_avoid_ai"})
#: A helper bpf_helpers.h declares, or defines as a macro over one of bridge.c's functions.
HELPER_DECLARATION = re.compile(r"^(?:\w[\w\s\*]*?|#define\s+)\b(bpf_\w+)\s*\(", re.MULTILINE)


@lru_cache(maxsize=1)
def shim_helpers() -> frozenset[str]:
    """The helpers the shim declares in bpf/bpf_helpers.h (bridge.c defines them)."""
    return frozenset(HELPER_DECLARATION.findall((SHIM_DIR / "include" / "bpf" / "bpf_helpers.h").read_text()))


class NativeBuildError(SpecError):
    """A user's source the simulator cannot build (one line: the file, the line, the reason)."""


def cache_dir() -> Path:
    return cache_root() / "native"


@lru_cache(maxsize=1)
def shim_digest() -> str:
    """sha256 of every file of the shim: a change to it rebuilds every library. Read once per
    process (a sweep's worker asks for it twice per run)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in SHIM_DIR.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(SHIM_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def library_path(bpf_source: dict, cache: Path | None = None, defines: Mapping[str, str] | None = None) -> Path:
    given = ",".join(f"{name}={value}" for name, value in sorted((defines or {}).items()))
    key = hashlib.sha256(f"{bpf_source['sha256']}:{bpf_source['struct_ops']}:{shim_digest()}:{given}".encode()).hexdigest()[:16]
    return (cache or cache_dir()) / f"{bpf_source['struct_ops']}-{key}.so"


def build(bpf_source: dict, cache: Path | None = None, defines: Mapping[str, str] | None = None) -> Path:
    """The shared library of a flow's `bpf_source` (the resolved config's), built if absent;
    `defines` are the build parameters a source asks for (-D NAME=VALUE), as the project's
    BBR ports do."""
    lib = library_path(bpf_source, cache, defines)
    if lib.exists():
        return lib
    clang = shutil.which("clang")
    if clang is None:
        raise NativeBuildError(f"{Path(bpf_source['path']).name}: the simulator builds C sources with clang, which is not installed (make install)")
    lib.parent.mkdir(parents=True, exist_ok=True)
    source = Path(bpf_source["path"])
    tmp = lib.with_suffix(f".tmp{os.getpid()}")
    args = [
        clang, "-O2", "-g0", "-shared", "-fPIC", "-fvisibility=hidden", "-Wfatal-errors",
        # The shim's headers first; the file's own folder holds what it includes beside it.
        f"-I{SHIM_DIR / 'include'}", f"-I{source.parent}", "-DBPF_NO_PRESERVE_ACCESS_INDEX",
        f'-DCCLAB_SOURCE="{source}"', f"-DCCLAB_OPS={bpf_source['struct_ops']}",
        *(f"-D{name}={value}" for name, value in sorted((defines or {}).items())),
        str(SHIM_DIR / "bridge.c"), "-o", str(tmp), "-Wl,-z,defs",
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise NativeBuildError(f"{bpf_source['path']}: the simulator cannot build it: {first_error(done.stderr)}")
    tmp.replace(lib)
    return lib


def build_port(source: Path, struct_ops: str, defines: Mapping[str, str]) -> Path:
    """One of the project's own ports (crates/cclab-bpf-*), built for the simulator with its
    build parameters; its key covers the headers it includes (its folder's, the common one)."""
    from cclab.engines.kernel.bpf_cc import source_bytes

    digest = hashlib.sha256(source_bytes(source)).hexdigest()
    return build({"path": str(source), "struct_ops": struct_ops, "sha256": digest}, defines=defines)


def first_error(stderr: str) -> str:
    """The line that says why: the shim's refusal, else the compiler's or linker's first error."""
    shim = SHIM_ERROR.search(stderr)
    if shim:
        return shim.group(1)
    compiler = COMPILER_ERROR.search(stderr)
    if compiler:
        return compiler.group(1)
    undefined = re.search(r"undefined (?:reference to|symbol:?) `?(\w+)", stderr)
    if undefined:
        return f"it calls {undefined.group(1)}, which the simulator's shim does not provide (crates/cclab-cc/shim/bridge.c)"
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "clang failed"
