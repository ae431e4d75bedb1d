"""A user's congestion control from its BPF C source (a flow's `cc = "FILE.bpf.c[:NAME]"`,
spec/bpf_source.py), built and registered for one run like cclab's own ports (bpf_cc.py).

What cclab changes in the user's file, in a copy it compiles (the file itself is never
touched):
- every struct_ops map and its `.name` become `cclab_u<first 7 hex of the source's
  sha256><index>`, so that the kernel-global names are cclab's (found and removed by
  `bpf_cc.cleanup_stale` if a run dies) and two versions of a file never collide;
- `SEC(".struct_ops.link")` becomes `SEC(".struct_ops")`: `bpftool struct_ops register`
  keeps a map registered after it exits, a link only while pinned. The kernel runs the same
  tcp_congestion_ops either way.

Includes: this kernel's vmlinux.h (bpftool's dump of its BTF), libbpf's headers
(`bpf/bpf_helpers.h`, `bpf/bpf_tracing.h`, `bpf/bpf_core_read.h`), the headers beside the file
(a selftest's `bpf_tcp_helpers.h` or `bpf_tracing_net.h`), and the system's multiarch folder
for the older style's `<linux/types.h>`.
"""

from __future__ import annotations

import os
import platform
import re
import sysconfig
from pathlib import Path

from cclab.engines.kernel import bpf_cc
from cclab.engines.kernel.errors import UserSourceError
from cclab.spec.bpf_source import STRUCT_OPS_MAP, MAP_NAME

USER_PREFIX = f"{bpf_cc.BPF_PREFIX}u"


def kernel_cc_of(flow: dict, native: dict[str, str] | None = None) -> str:
    """The name a flow's sender socket selects: a user's map's cclab name, else
    bpf_cc.kernel_cc_name (the kernel's own CC or cclab's port)."""
    if "bpf_source" in flow:
        return kernel_name(flow["bpf_source"])
    return bpf_cc.kernel_cc_name(flow["cc"], flow.get("probe_bw_gain"), native)


def bpf_names(config: dict, native: dict[str, str] | None = None) -> list[str]:
    """The distinct BPF CCs a resolved config needs (cclab's ports and users' sources), in flow order."""
    names = [kernel_cc_of(f, native) for f in config["flows"]]
    return list(dict.fromkeys(n for n in names if bpf_cc.is_bpf_name(n)))


def prebuilt(config: dict) -> dict[str, tuple[Path, dict]]:
    """Each user source's object and what provenance says of it, by kernel name."""
    out: dict[str, tuple[Path, dict]] = {}
    for flow in config["flows"]:
        source = flow.get("bpf_source")
        if source is not None and kernel_name(source) not in out:
            about = {"source": source["path"], "sha256": source["sha256"], "struct_ops": source["struct_ops"], "name_in_source": source["name"]}
            out[kernel_name(source)] = (build(source), about)
    return out


def kernel_name(bpf_source: dict) -> str:
    """The name the flow's map registers under: 15 characters, the kernel's limit."""
    return f"{USER_PREFIX}{bpf_source['sha256'][:7]}{bpf_source['index']}"


def is_user_name(name: str) -> bool:
    return name.startswith(USER_PREFIX)


def patched(text: str, sha256: str) -> str:
    """The source with every struct_ops map named by cclab and registered as a map."""
    index = 0

    def rename(match: re.Match[str]) -> str:
        nonlocal index
        name = f"{USER_PREFIX}{sha256[:7]}{index}"
        index += 1
        body = MAP_NAME.sub(f'.name = "{name}"', match.group(2), count=1)
        # The map takes the same name: bpftool and cleanup_stale know a struct_ops by its map.
        return f'SEC(".struct_ops") struct tcp_congestion_ops {name} = {{{body}}};'

    return STRUCT_OPS_MAP.sub(rename, text)


def _multiarch_include() -> list[str]:
    triplet = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
    folder = Path("/usr/include") / triplet
    return ["-idirafter", str(folder)] if folder.is_dir() else []


def build(bpf_source: dict, cache: Path | None = None) -> Path:
    """The compiled object of a user's source, from the cache if an identical build exists."""
    cache = cache or bpf_cc.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    source = Path(bpf_source["path"])
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as error:
        raise bpf_cc.KernelEngineError(f"cannot read {source}: {error}") from None
    text = patched(text, bpf_source["sha256"])
    digest = bpf_cc.btf_digest()
    key = bpf_cc.object_key(text.encode(), bpf_source["sha256"], platform.release(), digest, {})
    stem = f"{USER_PREFIX}{bpf_source['sha256'][:7]}"
    obj = cache / f"{stem}-{key}.o"
    if obj.exists():
        return obj
    header_dir = bpf_cc.vmlinux_header_dir(cache, digest)
    copy = cache / f"{stem}-{key}-{source.name}"
    copy.write_text(text, encoding="utf-8")
    tmp_obj = obj.with_suffix(f".tmp{os.getpid()}")
    args = [*bpf_cc.clang_args(header_dir), f"-I{source.parent}", *_multiarch_include()]
    try:
        bpf_cc._run([*args, "-c", str(copy), "-o", str(tmp_obj)], f"compiling {source.name}")
    except bpf_cc.KernelEngineError as error:  # the user's C: bad input (exit 2)
        raise UserSourceError(error.line) from None
    tmp_obj.replace(obj)
    return obj
