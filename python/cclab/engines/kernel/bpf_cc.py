"""BBR variants the running kernel does not have, as BPF struct_ops congestion controls
built from crates/cclab-bpf-bbr and registered for one run.

- BBRv1 at another PROBE_BW up-gain: `cclab_bbr<gain x 1000>` from bbr.bpf.c (a port of
  Linux tcp_bbr.c). At Linux's gain (1.25) the kernel's own `bbr` runs, the ground truth.
- BBRv3 (cc "bbr3"): the kernel's own when it has one (google/bbr's v3 kernel registers it
  as `bbr`; `native_versions()` tells v3 from v1), else `cclab_bbr3` from bbr3.bpf.c, a port
  of google/bbr v3 tcp_bbr.c onto mainline's rate sample (docs/FIDELITY.md). On a v3
  kernel BBRv1 (cc "bbr") runs the v1 port, since that kernel's `bbr` is v3.
- BBRv2 (cc "bbr2"): the kernel's own `bbr2` where google/bbr's v2alpha kernel registered
  it, else `cclab_bbr2`: bbr3.bpf.c built with -DCCLAB_BBR_V2ALPHA, a port of v2alpha's
  tcp_bbr2.c (v3's ancestor: the same model with other constants and a few marked paths).

- DCTCP (cc "dctcp"): the kernel's own `dctcp` where it has tcp_dctcp (loaded or loadable),
  else `cclab_dctcp` from crates/cclab-bpf-l4s/dctcp.bpf.c, a port of tcp_dctcp.c that
  registers with TCP_CONG_NEEDS_ECN. The receiving socket takes the same CC (iperf3's
  server sets the client's -C on it; receiver.py does too): DCTCP's CE echo runs there.

Objects are compiled with clang against this kernel's BTF (vmlinux.h from bpftool), cached
by source, variant, kernel and BTF, registered with `bpftool struct_ops register` before
the run and unregistered at teardown.

Registering a CC is kernel-global. Names are cclab's own (prefix `cclab_`), the root
namespace's default CC is never touched, and kernel runs are serialized by the host-wide
run lock (runlock.py), so two runs never hold the same name at once. Before registering,
a run writes its pid and names to /run/cclab/bpf/<run id>.json; a later run unregisters
any `cclab_*` struct_ops whose owner is dead (`cleanup_stale`).
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
from functools import lru_cache
from pathlib import Path

from cclab.engines.base import cache_root
from cclab.engines.kernel.errors import KernelEngineError, UserSourceError

#: Every BPF CC cclab registers is named `cclab_...`; BBR at another gain `cclab_bbr<permille>`.
BPF_PREFIX = "cclab_"
CA_PREFIX = "cclab_bbr"
#: tcp_bbr.c bbr_pacing_gain[0] = BBR_UNIT * 5 / 4: flows at this gain run the built-in `bbr`.
LINUX_PROBE_BW_GAIN_PERMILLE = 1250
#: pacing_gain is a 10-bit field of BBR_UNIT (256) in struct bbr: gains below 1023/256.
MAX_GAIN_PERMILLE = 1023 * 1000 // 256
FORCE_PORT_ENV = "CCLAB_KERNEL_BBR_PORT"
SOURCE_DIR = Path(__file__).resolve().parents[4] / "crates" / "cclab-bpf-bbr"
SOURCE = SOURCE_DIR / "bbr.bpf.c"
L4S_SOURCE_DIR = SOURCE_DIR.parent / "cclab-bpf-l4s"
#: What every port includes by a relative path (tcp_sk(), before(), the jiffies helpers, ...).
PORTS_COMMON_HEADER = SOURCE_DIR.parent / "cclab-bpf-common" / "cclab_tcp.h"
#: Spec cc -> the BPF port that stands in when the kernel lacks it natively.
PORTS = {"bbr3": f"{CA_PREFIX}3", "bbr2": f"{CA_PREFIX}2", "dctcp": f"{BPF_PREFIX}dctcp"}
#: Port -> its source and the defines that select its version (one source serves v2 and v3).
PORT_SOURCES = {f"{CA_PREFIX}3": SOURCE_DIR / "bbr3.bpf.c", f"{CA_PREFIX}2": SOURCE_DIR / "bbr3.bpf.c",
                f"{BPF_PREFIX}dctcp": L4S_SOURCE_DIR / "dctcp.bpf.c"}  # fmt: skip
PORT_DEFINES: dict[str, dict[str, int]] = {f"{CA_PREFIX}3": {}, f"{CA_PREFIX}2": {"CCLAB_BBR_V2ALPHA": 1}, f"{BPF_PREFIX}dctcp": {}}
#: Spec cc -> the name the kernel registers it under (google/bbr's kernels for v2 and v3).
NATIVE_NAMES = {"bbr3": "bbr", "bbr2": "bbr2", "dctcp": "dctcp"}
#: Kernel functions only google/bbr's versions have: v3's tcp_bbr.c registers
#: bbr_skb_marked_lost as a kfunc (so it is never inlined away); v2alpha's tcp_bbr2.c
#: names its functions bbr2_*.
V3_SYMBOL = "bbr_skb_marked_lost"
V2_SYMBOL = "bbr2_main"
SYS_MODULE = Path("/sys/module")
KALLSYMS = Path("/proc/kallsyms")
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
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


@lru_cache(maxsize=1)
def _kernel_symbols() -> frozenset[str]:
    try:
        text = KALLSYMS.read_text()
    except OSError:
        return frozenset()
    found = set()
    for line in text.splitlines():
        parts = line.split()  # address, type, name[, [module]]
        if len(parts) >= 3 and parts[2] in (V3_SYMBOL, V2_SYMBOL):
            found.add(parts[2])
    return frozenset(found)


def _module_exists(module: str) -> bool:
    """modinfo finds the module: a root socket that selects its CC would load it."""
    if shutil.which("modinfo") is None:
        return False
    return subprocess.run(["modinfo", "-F", "filename", module], capture_output=True, timeout=30).returncode == 0


def _module_version(module: str) -> str:
    """`modinfo -F version` of a module not loaded yet ("" if none or no modinfo)."""
    if shutil.which("modinfo") is None:
        return ""
    out = subprocess.run(["modinfo", "-F", "version", module], capture_output=True, text=True, timeout=30)
    return out.stdout.strip() if out.returncode == 0 else ""


def native_versions(
    available: list[str],
    *,
    sys_module: Path = SYS_MODULE,
    symbols: frozenset[str] | None = None,
    module_version=_module_version,  # noqa: ANN001
    module_exists=_module_exists,  # noqa: ANN001
) -> dict[str, str]:
    """The BBR versions this kernel has natively: spec cc -> how that was told, e.g.
    {"bbr3": "bbr is google/bbr v3 (/sys/module/tcp_bbr/version = 3)"}. "bbr" (v1) is
    included unless the kernel's `bbr` is v3. Never guessed: v3 only from the module's
    version string (tcp_bbr.c v3: MODULE_VERSION(BBR_VERSION); mainline's has none) or a
    v3-only kernel symbol. A tcp_bbr module not loaded yet (a root socket that selects
    `bbr` loads it) is told by modinfo."""
    found: dict[str, str] = {}
    symbols = _kernel_symbols() if symbols is None else symbols
    if "bbr" not in available and module_version("tcp_bbr") == "3":
        found["bbr3"] = "bbr is google/bbr v3 (modinfo tcp_bbr: version 3, not loaded yet)"
    elif "bbr" in available:
        version_file = sys_module / "tcp_bbr" / "version"
        try:
            version = version_file.read_text().strip()
        except OSError:
            version = ""
        if version == "3":
            found["bbr3"] = f"bbr is google/bbr v3 ({version_file} = 3)"
        elif V3_SYMBOL in symbols:
            found["bbr3"] = f"bbr is google/bbr v3 (kernel symbol {V3_SYMBOL})"
        else:
            found["bbr"] = "bbr is Linux's BBRv1"
    if "bbr2" in available and ((sys_module / "tcp_bbr2").exists() or V2_SYMBOL in symbols):
        found["bbr2"] = "bbr2 is google/bbr v2alpha"
    if "dctcp" in available:
        found["dctcp"] = "dctcp is registered (tcp_dctcp)"
    elif module_exists("tcp_dctcp"):
        found["dctcp"] = "tcp_dctcp is a module, loaded when a socket selects it"
    return found


@lru_cache(maxsize=1)
def host_native_versions() -> dict[str, str]:
    """native_versions() of this host (cached for the process)."""
    try:
        available = AVAILABLE_CC.read_text().split()
    except OSError:
        available = []
    return native_versions(available)


def kernel_cc_name(cc: str, gain: float | None, native: dict[str, str] | None = None) -> str:
    """The name the sender's socket selects: the kernel's own CC where it has the asked
    version, else cclab's BPF port. `native` defaults to host_native_versions()."""
    if cc not in ("bbr", *PORTS, *NATIVE_NAMES):
        return cc
    native = host_native_versions() if native is None else native
    if cc != "bbr":
        if cc in native:
            return NATIVE_NAMES[cc]
        return PORTS[cc]
    permille = LINUX_PROBE_BW_GAIN_PERMILLE if gain is None else permille_of(gain)
    # google/bbr's v3 kernel registers v3 as `bbr`: BBRv1 then needs the port.
    if permille == LINUX_PROBE_BW_GAIN_PERMILLE and not port_forced() and "bbr3" not in native:
        return cc
    return f"{CA_PREFIX}{permille}"


def implementation(kernel_cc: str) -> str:
    """For provenance "cc_implementation": "native" or "bpf-port"."""
    return "bpf-port" if is_bpf_name(kernel_cc) else "native"


def is_bpf_name(name: str) -> bool:
    return name.startswith(BPF_PREFIX)


def source_of(name: str) -> tuple[Path, dict[str, int]]:
    """The source file of a cclab BPF CC and the defines that select its variant."""
    if name in PORT_SOURCES:
        return PORT_SOURCES[name], PORT_DEFINES[name]
    m = re.fullmatch(rf"{CA_PREFIX}(\d{{4}})", name)
    if m is None:
        raise KernelEngineError(f"{name} is not a cclab BPF congestion control")
    return SOURCE, {"CCLAB_PROBE_BW_GAIN_PERMILLE": int(m.group(1))}


def source_bytes(source: Path) -> bytes:
    """The source, the headers beside it (bbr3/*.h) and the ports' common header, in a stable
    order, for the cache key."""
    headers = sorted(source.parent.rglob("*.h"))
    return b"".join(p.read_bytes() for p in [source, *headers, PORTS_COMMON_HEADER])


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
    if not _has_tcp_struct_ops():
        return "this kernel cannot load a congestion control as BPF struct_ops (CONFIG_BPF_JIT, BTF)"
    return None


@lru_cache(maxsize=1)
def _has_tcp_struct_ops() -> bool:
    """The kernel's BTF names bpf_struct_ops_tcp_congestion_ops (net/ipv4/bpf_tcp_ca.c)."""
    try:
        return b"bpf_struct_ops_tcp_congestion_ops" in BTF_PATH.read_bytes()
    except OSError:
        return False


def cache_dir() -> Path:
    return cache_root() / "bpf"


def kernel_defines(config: dict[str, str]) -> dict[str, int]:
    """CONFIG_HZ and MAX_TCP_HEADER of the running kernel, from its config (kconfig.kernel_config)."""
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


def object_key(source: bytes, variant: object, release: str, btf_digest: str, defines: dict[str, int]) -> str:
    """Cache key of one built object: everything that changes its bytes."""
    h = hashlib.sha256(source)
    h.update(json.dumps([variant, release, btf_digest, sorted(defines.items())]).encode())
    return h.hexdigest()[:20]


def _run(args: list[str], what: str) -> str:
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        text = out.stderr or out.stdout
        rejected = verifier_words(text)
        if rejected is not None:
            # A user's source (registered as cclab_u...) is bad input; cclab's own ports are not.
            raise (UserSourceError if f"{BPF_PREFIX}u" in what else KernelEngineError)(f"{what} failed: {rejected}")
        raise KernelEngineError(f"{what} failed: {' '.join(text.strip().splitlines()[-3:])}")
    return out.stdout


#: libbpf's copy of the verifier's log, and the source line the verifier annotates.
PROG_LOAD_LOG = re.compile(r"prog '(\w+)': -- BEGIN PROG LOAD LOG --\n(.*?)-- END PROG LOAD LOG --", re.DOTALL)
SOURCE_LINE = re.compile(r"^; (.*?) @ (?:cclab_u[0-9a-f]+-[0-9a-f]+-)?([^ ]+:\d+)$")


def verifier_words(text: str) -> str | None:
    """The verifier's last words on a program it rejected, with the source line it was at:
    "the verifier rejected PROG at FILE:LINE (CODE): WORDS", or None without such a log."""
    match = PROG_LOAD_LOG.search(text)
    if match is None:
        return None
    prog, log = match.group(1), [line for line in match.group(2).splitlines() if line.strip()]
    words = [line for line in log if not line.startswith(("processed ", "; ")) and not re.match(r"^\d+: ", line)]
    if not words:
        return None
    at = ""
    for line in log:
        found = SOURCE_LINE.match(line)
        if found:
            at = f" at {found.group(2)} ({found.group(1).strip()})"
    return f"the verifier rejected {prog}{at}: {words[-1]}"


def btf_digest() -> str:
    """This kernel's BTF, hashed: vmlinux.h and every object are built against it."""
    return hashlib.sha256(BTF_PATH.read_bytes()).hexdigest()[:16]


def vmlinux_header_dir(cache: Path, digest: str | None = None) -> Path:
    """The folder of this kernel's vmlinux.h (bpftool's dump of its BTF), made once per BTF."""
    header_dir = cache / f"btf-{digest or btf_digest()}"
    header = header_dir / "vmlinux.h"
    if not header.exists():
        header_dir.mkdir(parents=True, exist_ok=True)
        text = _run([find_bpftool() or "bpftool", "btf", "dump", "file", str(BTF_PATH), "format", "c"], "bpftool btf dump")
        if "bpf_struct_ops_tcp_congestion_ops" not in text:
            raise KernelEngineError("this kernel cannot load a congestion control as BPF struct_ops")
        tmp = header.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(header)
    return header_dir


def clang_args(header_dir: Path) -> list[str]:
    """clang for a BPF object against vmlinux.h in `header_dir` (CO-RE, this architecture)."""
    arch = {"x86_64": "x86", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return [find_clang() or "clang", "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{arch}", f"-I{header_dir}"]


def build(name: str, defines: dict[str, int], cache: Path | None = None) -> Path:
    """The compiled object of the cclab BPF CC `name`, from the cache if an identical build exists."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    source, variant_defines = source_of(name)
    digest = btf_digest()
    all_defines = {**variant_defines, **defines}
    key = object_key(source_bytes(source), name, platform.release(), digest, all_defines)
    obj = cache / f"{name}-{key}.o"
    if obj.exists():
        return obj
    header_dir = vmlinux_header_dir(cache, digest)
    tmp_obj = obj.with_suffix(f".tmp{os.getpid()}")
    args = clang_args(header_dir)
    args += [f"-DCCLAB_CA_NAME={name}", *(f"-D{k}={v}" for k, v in sorted(all_defines.items()))]
    _run([*args, "-c", str(source), "-o", str(tmp_obj)], f"compiling {name}")
    tmp_obj.replace(obj)
    return obj


def available_ccs() -> set[str]:
    """The congestion controls TCP offers now (net.ipv4.tcp_available_congestion_control)."""
    try:
        return set(AVAILABLE_CC.read_text().split())
    except OSError:
        return set()


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
    """Unregisters `cclab_*` struct_ops that no live run owns; returns their names."""
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
    offered = available_ccs()
    for entry in list_registered():
        # Only what TCP still offers: a map already unregistered is freed by the kernel once
        # the last socket using it is gone (unregistering it again fails with EINPROGRESS).
        if is_bpf_name(entry.get("name", "")) and entry["name"] not in live and entry["name"] in offered:
            _unregister_id(int(entry["id"]))
            removed.append(entry["name"])
    return removed


@dataclass
class RunCcs:
    """The BPF CCs one run registered; `unregister_all()` is idempotent and safe from atexit."""

    run_id: str
    registered: dict[str, int] = field(default_factory=dict)  # name -> struct_ops map id
    objects: dict[str, str] = field(default_factory=dict)  # name -> object file
    about: dict[str, dict] = field(default_factory=dict)  # name -> its source, for provenance
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

    def register(self, names: list[str], defines: dict[str, int], prebuilt: dict[str, tuple[Path, dict]] | None = None) -> None:
        """Builds (or takes from the cache) and registers each CC in `names`; `prebuilt`
        gives the objects of users' sources (user_cc.prebuilt) and what to say of them."""
        bpftool = find_bpftool() or "bpftool"
        for name in names:
            if prebuilt and name in prebuilt:
                obj, about = prebuilt[name]
            else:
                obj, about = build(name, defines), {"source": str(source_of(name)[0])}
            # A map bpftool still lists but TCP no longer offers is being freed (unregistered,
            # a dying namespace's socket still holding it): the name is free to register again.
            listed = list_registered(bpftool)
            if name in available_ccs() and any(e.get("name") == name for e in listed):
                raise KernelEngineError(f"{name} is already registered by a live process (bpftool struct_ops list)")
            self._write_record([*self.registered, name])  # before registering: a crash leaves it findable
            before = {int(e["id"]) for e in listed}
            _run([bpftool, "struct_ops", "register", str(obj)], f"registering {name}")
            # Every map of the object is registered (a user's file may define several): all are
            # the run's to unregister, the flow's and its siblings.
            for entry in list_registered(bpftool):
                if int(entry["id"]) not in before and is_bpf_name(entry.get("name", "")):
                    self.registered[entry["name"]] = int(entry["id"])
            if name not in self.registered:
                raise KernelEngineError(f"registering {name}: bpftool reported no struct_ops map")
            self._write_record(list(self.registered))
            self.objects[name] = str(obj)
            self.about[name] = about

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
        return {name: {"object": obj, **self.about.get(name, {})} for name, obj in self.objects.items()}

    def read_state_counts(self) -> dict[str, dict[str, int]]:
        """Per registered port with a stats array: for BBRv2/v3 the ACKs processed in each
        state and the loss responses (bbr3.bpf.c's `bbr3_stats`/`bbr2_stats`), for DCTCP its
        reactions (dctcp.bpf.c's `dctcp_stats`); read before unregistering."""
        out = {}
        for name in self.registered:
            if name in STATS:
                map_name, program, names = STATS[name]
                counts = read_stats_map(map_name, program)
                if counts is not None:
                    out[name] = dict(zip(names, counts, strict=False))
        return out


#: bbr3.bpf.c, per port: the counters array and a program that uses it (the v2 build
#: takes v2 names, state.h), and the meaning of each entry.
STATS_NAMES = ("startup", "drain", "probe_bw_down", "probe_bw_cruise", "probe_bw_refill", "probe_bw_up",
               "probe_rtt", "inflight_hi_cuts", "lower_bound_cuts", "probe_rtt_last_postponed_ms")  # fmt: skip
#: dctcp.bpf.c's enum dctcp_stat, in order.
DCTCP_STATS_NAMES = ("alpha_updates", "ssthresh_calls", "loss_reactions", "ce_state_changes", "reno_fallbacks",
                     "max_ssthresh", "max_undo_cwnd", "max_alpha")  # fmt: skip
STATS = {f"{CA_PREFIX}3": ("bbr3_stats", "bbr3_main", STATS_NAMES), f"{CA_PREFIX}2": ("bbr2_stats", "bbr2_main", STATS_NAMES),
         f"{BPF_PREFIX}dctcp": ("dctcp_stats", "dctcp_ssthresh", DCTCP_STATS_NAMES)}  # fmt: skip


def read_stats_map(map_name: str, program: str) -> list[int] | None:
    """The values of the array `map_name` used by the loaded program `program`, or None."""
    bpftool = find_bpftool() or "bpftool"
    try:
        progs = json.loads(_run([bpftool, "-j", "prog", "show"], "bpftool prog show") or "[]")
        maps = {m["id"]: m for m in json.loads(_run([bpftool, "-j", "map", "show"], "bpftool map show") or "[]")}
        ids = [i for p in progs if p.get("name") == program for i in p.get("map_ids", [])]
        ours = [i for i in ids if maps.get(i, {}).get("name") == map_name]
        if not ours:
            return None
        dump = json.loads(_run([bpftool, "-j", "map", "dump", "id", str(max(ours))], "bpftool map dump"))
    except (KernelEngineError, ValueError):
        return None
    values = {}
    for entry in dump:
        e = entry.get("formatted", entry)
        values[int(e["key"])] = int(e["value"])
    return [values[k] for k in sorted(values)]
