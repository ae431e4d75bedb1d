"""BBR with another PROBE_BW up-gain on the kernel engine: a BPF struct_ops port of
tcp_bbr.c (crates/cclab-bpf-bbr/bbr.bpf.c) built per gain and registered for one run.

A BBR flow at the Linux gain (1.25) runs the kernel's own `bbr`, the ground truth; any
other gain runs `cclab_bbr<gain x 1000>`, compiled with clang against this kernel's BTF
(vmlinux.h from bpftool), cached by source, gain, kernel and BTF, and registered with
`bpftool struct_ops register` before the run, unregistered at teardown.

Registering a CC is kernel-global. Names are cclab's own (prefix `cclab_bbr`), the root
namespace's default CC is never touched, and kernel runs are serialized by the host-wide
run lock (runlock.py), so two runs never hold the same name at once. Before registering,
a run writes its pid and names to /run/cclab/bpf/<run id>.json; a later run unregisters
any `cclab_bbr*` struct_ops whose owner is dead (`cleanup_stale`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cclab.engines.kernel.errors import KernelEngineError

CA_PREFIX = "cclab_bbr"
#: tcp_bbr.c bbr_pacing_gain[0] = BBR_UNIT * 5 / 4: flows at this gain run the built-in `bbr`.
LINUX_PROBE_BW_GAIN_PERMILLE = 1250
#: pacing_gain is a 10-bit field of BBR_UNIT (256) in struct bbr: gains below 1023/256.
MAX_GAIN_PERMILLE = 1023 * 1000 // 256
FORCE_PORT_ENV = "CCLAB_KERNEL_BBR_PORT"
SOURCE = Path(__file__).resolve().parents[4] / "crates" / "cclab-bpf-bbr" / "bbr.bpf.c"
BTF_PATH = Path("/sys/kernel/btf/vmlinux")
RECORD_DIR = Path("/run/cclab/bpf")
#: Debian's bpftool package installs to /usr/sbin, not on a normal user's PATH.
BPFTOOL_FALLBACKS = ("/usr/sbin/bpftool", "/sbin/bpftool")
CLANG_NAMES = ("clang", *(f"clang-{v}" for v in range(20, 13, -1)))
#: include/linux/netdevice.h LL_MAX_HEADER / MAX_HEADER and include/net/tcp.h
#: MAX_TCP_HEADER = L1_CACHE_ALIGN(128 + MAX_HEADER): bbr_tso_segs_goal()'s cap.
TCP_HEADER_ROOM_BYTES = 128
TUNNEL_HEADER_BYTES = 48


def permille_of(gain: float) -> int:
    """The gain x 1000 as an integer; ValueError if it has finer steps than 0.001."""
    permille = round(gain * 1000)
    if abs(permille - gain * 1000) > 1e-6:
        raise ValueError(f"probe_bw_gain {gain} has more than three decimals")
    if not 1000 < permille <= MAX_GAIN_PERMILLE:
        raise ValueError(f"probe_bw_gain {gain} is outside (1, {MAX_GAIN_PERMILLE / 1000}]")
    return permille


def port_forced() -> bool:
    """$CCLAB_KERNEL_BBR_PORT=1: BBR at Linux's gain runs the BPF port too (cclab_bbr1250),
    to compare the port with the built-in `bbr` (tests/kernel/test_kernel_bpf_bbr.py)."""
    return os.environ.get(FORCE_PORT_ENV) == "1"


def kernel_cc_name(cc: str, gain: float | None) -> str:
    """The name the sender's socket selects: the flow's CC, or cclab_bbr<permille>
    for BBR at a gain other than Linux's."""
    if cc != "bbr":
        return cc
    permille = LINUX_PROBE_BW_GAIN_PERMILLE if gain is None else permille_of(gain)
    if permille == LINUX_PROBE_BW_GAIN_PERMILLE and not port_forced():
        return cc
    return f"{CA_PREFIX}{permille}"


def is_bpf_name(name: str) -> bool:
    return name.startswith(CA_PREFIX)


def bpf_names(config: dict) -> list[str]:
    """The distinct BPF CCs a resolved config needs, in flow order."""
    names = [kernel_cc_name(f["cc"], f.get("probe_bw_gain")) for f in config["flows"]]
    return list(dict.fromkeys(n for n in names if is_bpf_name(n)))


def find_bpftool() -> str | None:
    return shutil.which("bpftool") or next((p for p in BPFTOOL_FALLBACKS if os.access(p, os.X_OK)), None)


def find_clang() -> str | None:
    return next((path for name in CLANG_NAMES if (path := shutil.which(name))), None)


def toolchain_problem() -> str | None:
    """Why a BPF CC cannot be built and loaded here, or None."""
    if find_clang() is None:
        return "clang is missing (apt-get install clang)"
    if find_bpftool() is None:
        return "bpftool is missing (apt-get install bpftool)"
    if not Path("/usr/include/bpf/bpf_helpers.h").exists():
        return "libbpf headers are missing (apt-get install libbpf-dev)"
    if not BTF_PATH.exists():
        return f"this kernel has no BTF ({BTF_PATH})"
    if not SOURCE.exists():
        return f"the BPF BBR source is missing ({SOURCE})"
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cclab" / "bpf"


def kernel_defines(config: dict[str, str]) -> dict[str, int]:
    """CONFIG_HZ and MAX_TCP_HEADER of the running kernel, from its config (preflight.kernel_config)."""
    hz = int(config.get("CONFIG_HZ", "0") or 0)
    if hz <= 0:
        raise KernelEngineError("BPF BBR needs the kernel's CONFIG_HZ: /proc/config.gz is not readable")
    on = lambda option: config.get(option) in ("y", "m")  # noqa: E731
    if on("CONFIG_HYPERV_NET"):
        ll_max_header = 128
    elif on("CONFIG_WLAN") or on("CONFIG_AX25"):
        ll_max_header = 128 if on("CONFIG_MAC80211_MESH") else 96
    else:
        ll_max_header = 32
    tunnels = any(on(o) for o in ("CONFIG_NET_IPIP", "CONFIG_NET_IPGRE", "CONFIG_IPV6_SIT", "CONFIG_IPV6_TUNNEL"))
    max_header = ll_max_header + (TUNNEL_HEADER_BYTES if tunnels else 0)
    cache_line = 1 << int(config.get("CONFIG_X86_L1_CACHE_SHIFT", "6") or 6)
    max_tcp_header = -(-(TCP_HEADER_ROOM_BYTES + max_header) // cache_line) * cache_line
    return {"CCLAB_HZ": hz, "CCLAB_MAX_TCP_HEADER": max_tcp_header}


def object_key(source: bytes, permille: int, release: str, btf_digest: str, defines: dict[str, int]) -> str:
    """Cache key of one built object: everything that changes its bytes."""
    h = hashlib.sha256(source)
    h.update(json.dumps([permille, release, btf_digest, sorted(defines.items())]).encode())
    return h.hexdigest()[:20]


def _run(args: list[str], what: str) -> str:
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        tail = " ".join((out.stderr or out.stdout).strip().splitlines()[-3:])
        raise KernelEngineError(f"{what} failed: {tail}")
    return out.stdout


def build(permille: int, defines: dict[str, int], cache: Path | None = None) -> Path:
    """The compiled object for `permille`, from the cache if an identical build exists."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    btf_digest = hashlib.sha256(BTF_PATH.read_bytes()).hexdigest()[:16]
    key = object_key(SOURCE.read_bytes(), permille, platform.release(), btf_digest, defines)
    name = f"{CA_PREFIX}{permille}"
    obj = cache / f"{name}-{key}.o"
    if obj.exists():
        return obj
    header_dir = cache / f"btf-{btf_digest}"
    header = header_dir / "vmlinux.h"
    if not header.exists():
        header_dir.mkdir(exist_ok=True)
        text = _run([find_bpftool() or "bpftool", "btf", "dump", "file", str(BTF_PATH), "format", "c"], "bpftool btf dump")
        if "bpf_struct_ops_tcp_congestion_ops" not in text:
            raise KernelEngineError("this kernel cannot load a congestion control as BPF struct_ops")
        tmp = header.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(header)
    arch = {"x86_64": "x86", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    tmp_obj = obj.with_suffix(f".tmp{os.getpid()}")
    args = [find_clang() or "clang", "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{arch}", f"-I{header_dir}"]
    args += [f"-DCCLAB_PROBE_BW_GAIN_PERMILLE={permille}", f"-DCCLAB_CA_NAME={name}"]
    args += [f"-D{k}={v}" for k, v in sorted(defines.items())]
    _run([*args, "-c", str(SOURCE), "-o", str(tmp_obj)], f"compiling {name}")
    tmp_obj.replace(obj)
    return obj


def list_registered(bpftool: str | None = None) -> list[dict]:
    """`bpftool struct_ops list` as [{"id", "name", "kernel_struct_ops"}]."""
    out = _run([bpftool or find_bpftool() or "bpftool", "-j", "struct_ops", "list"], "bpftool struct_ops list")
    return json.loads(out or "[]")


def _unregister_id(map_id: int) -> None:
    subprocess.run([find_bpftool() or "bpftool", "struct_ops", "unregister", "id", str(map_id)],
                   capture_output=True, timeout=60)  # fmt: skip


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def cleanup_stale() -> list[str]:
    """Unregisters `cclab_bbr*` struct_ops that no live run owns; returns their names."""
    if find_bpftool() is None:
        return []
    live: set[str] = set()
    if RECORD_DIR.is_dir():
        for path in RECORD_DIR.glob("*.json"):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            pid = int(record.get("pid", 0))
            if pid > 0 and _start_time(pid) == record.get("pid_start"):
                live.update(record.get("names", []))
            else:
                path.unlink(missing_ok=True)
    removed = []
    for entry in list_registered():
        if is_bpf_name(entry.get("name", "")) and entry["name"] not in live:
            _unregister_id(int(entry["id"]))
            removed.append(entry["name"])
    return removed


@dataclass
class RunCcs:
    """The BPF CCs one run registered; `unregister_all()` is idempotent and safe from atexit."""

    run_id: str
    registered: dict[str, int] = field(default_factory=dict)  # name -> struct_ops map id
    objects: dict[str, str] = field(default_factory=dict)  # name -> object file
    owner_pid: int = field(default_factory=os.getpid)

    @property
    def record_path(self) -> Path:
        return RECORD_DIR / f"{self.run_id}.json"

    def _write_record(self, names: list[str]) -> None:
        RECORD_DIR.mkdir(parents=True, exist_ok=True)
        record = {"pid": os.getpid(), "pid_start": _start_time(os.getpid()), "names": names}
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.record_path)

    def register(self, names: list[str], defines: dict[str, int]) -> None:
        """Builds (or takes from the cache) and registers each CC in `names`."""
        bpftool = find_bpftool() or "bpftool"
        for name in names:
            obj = build(int(name[len(CA_PREFIX) :]), defines)
            taken = [e for e in list_registered(bpftool) if e.get("name") == name]
            if taken:
                raise KernelEngineError(f"{name} is already registered by a live process (bpftool struct_ops list)")
            self._write_record([*self.registered, name])  # before registering: a crash leaves it findable
            out = _run([bpftool, "struct_ops", "register", str(obj)], f"registering {name}")
            m = re.search(rf"\b{name} id (\d+)", out)
            ids = [int(m.group(1))] if m else [int(e["id"]) for e in list_registered(bpftool) if e.get("name") == name]
            if not ids:
                raise KernelEngineError(f"registering {name}: bpftool reported no struct_ops map")
            self.registered[name] = ids[0]
            self.objects[name] = str(obj)

    def unregister_all(self) -> None:
        if os.getpid() != self.owner_pid:
            return
        for name, map_id in list(self.registered.items()):
            _unregister_id(map_id)
            del self.registered[name]
        with contextlib.suppress(OSError):
            self.record_path.unlink(missing_ok=True)

    def describe(self) -> dict[str, dict]:
        """For provenance: each BPF CC's object file (its name holds the cache key)."""
        return {name: {"object": obj, "source": str(SOURCE)} for name, obj in self.objects.items()}
