"""A flow's congestion control from a user's C source: a BPF struct_ops `tcp_congestion_ops`
written as Linux's BPF selftests write them (tools/testing/selftests/bpf/progs).

`cc = "my_cc.bpf.c"` (any `.c` file) names the file (relative to the spec file, or to the working directory for
a spec given as a dict); `"my_cc.bpf.c:name"` picks one map where the file defines several, by
its C variable or its `.name`. Parsed here once: which maps the file defines, their names and
flags (TCP_CONG_NEEDS_ECN), and the hash of the source and the headers beside it, which goes
into the resolved config and so into the run key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

#: Any C file: Linux's selftests name theirs bpf_cubic.c, cclab's examples FILE.bpf.c.
SOURCE_SUFFIX = ".c"
#: SEC(".struct_ops") or SEC(".struct_ops.link"), then the map's definition.
STRUCT_OPS_MAP = re.compile(r'SEC\(\s*"\.struct_ops(?:\.link)?"\s*\)\s*struct\s+tcp_congestion_ops\s+(\w+)\s*=\s*\{(.*?)\}\s*;', re.DOTALL)
MAP_NAME = re.compile(r'\.name\s*=\s*"([^"]*)"')
#: The kernel's TCP_CA_NAME_MAX (include/net/tcp.h) less the terminating NUL.
MAX_NAME_CHARS = 15


def is_source(cc: str) -> bool:
    """Whether a flow's `cc` names a C source rather than a built-in CC."""
    return cc.split(":", 1)[0].endswith(SOURCE_SUFFIX)


@dataclass(frozen=True)
class StructOpsMap:
    variable: str  # the C variable of the map
    name: str  # its .name: what the kernel would register it as
    needs_ecn: bool  # .flags has TCP_CONG_NEEDS_ECN


@dataclass(frozen=True)
class BpfSource:
    path: Path  # absolute
    maps: tuple[StructOpsMap, ...]  # every struct_ops map the file defines, in file order
    chosen: int  # the index in `maps` of the flow's CC
    sha256: str  # of the source and the headers beside it

    @property
    def map(self) -> StructOpsMap:
        return self.maps[self.chosen]

    @property
    def label(self) -> str:
        """The flow's `cc` in results: the file's name and the map's variable."""
        return f"{self.path.name}:{self.map.variable}"

    def resolved(self) -> dict[str, object]:
        """The resolved config's `bpf_source` of a flow (docs/ARCHITECTURE.md)."""
        return {"path": str(self.path), "struct_ops": self.map.variable, "name": self.map.name, "index": self.chosen,
                "maps": len(self.maps), "sha256": self.sha256}  # fmt: skip


def sources_beside(values: object, base_dir: Path) -> object:
    """A sweep axis's values with relative C sources (a `cc`, or a flow table's `cc`) made
    relative to `base_dir`, the sweep file's folder."""
    if not isinstance(values, list):
        return values
    out = []
    for value in values:
        if isinstance(value, str) and is_source(value) and not Path(value).is_absolute():
            value = str(base_dir / value)
        elif isinstance(value, dict) and isinstance(value.get("cc"), str) and is_source(value["cc"]) and not Path(value["cc"]).is_absolute():
            value = {**value, "cc": str(base_dir / value["cc"])}
        out.append(value)
    return out


def source_digest(path: Path) -> str:
    """sha256 of the file and of the headers beside it (which it may include), in a stable order."""
    digest = hashlib.sha256(path.read_bytes())
    for header in sorted(path.parent.glob("*.h")):
        digest.update(header.name.encode() + b"\0" + header.read_bytes())
    return digest.hexdigest()


def parse_maps(text: str) -> tuple[StructOpsMap, ...]:
    maps = []
    for match in STRUCT_OPS_MAP.finditer(text):
        body = match.group(2)
        name = MAP_NAME.search(body)
        if name is None:
            raise ValueError(f"the struct_ops map {match.group(1)} has no .name string literal")
        maps.append(StructOpsMap(match.group(1), name.group(1), "TCP_CONG_NEEDS_ECN" in body))
    return tuple(maps)


def load(cc: str, base_dir: Path) -> BpfSource:
    """The source a flow's `cc` names; ValueError (one line) if it cannot be used."""
    file_text, _, wanted = cc.partition(":")
    path = Path(file_text)
    if not path.is_absolute():
        path = base_dir / path
    path = path.resolve()
    if not path.is_file():
        raise ValueError(f"no such file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read {path}: {error}") from None
    maps = parse_maps(text)
    if not maps:
        raise ValueError(f'{path.name} defines no SEC(".struct_ops") struct tcp_congestion_ops')
    if wanted:
        found = [i for i, m in enumerate(maps) if wanted in (m.variable, m.name)]
        if not found:
            raise ValueError(f"{path.name} has no struct_ops map {wanted!r} (it has {', '.join(m.variable for m in maps)})")
        chosen = found[0]
    elif len(maps) > 1:
        raise ValueError(f'{path.name} defines {len(maps)} struct_ops maps; pick one as "{path.name}:NAME" ({", ".join(m.variable for m in maps)})')
    else:
        chosen = 0
    return BpfSource(path, maps, chosen, source_digest(path))
