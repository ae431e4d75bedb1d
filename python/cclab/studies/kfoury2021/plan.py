"""What the Kfoury study runs (full and quick) and the pieces its experiments share."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cclab.analysis.timeseries import cc_label
from cclab.spec.bpf_source import is_source
from cclab.studies._manyflows import verdict
from cclab.units import FRAME_BYTES, MSS_BYTES

RATE_MBPS = 1000
WARMUP_S = 5.0
#: The BBR versions the study compares ("bbr" is BBRv1).
BBRS = ("bbr", "bbr2", "bbr3")
ALL_CCS = (*BBRS, "cubic")
#: 1 Gbit/s x 1448/1514 (goodput ceiling) shared by 100 flows.
FAIR_SHARE_MBPS = RATE_MBPS * MSS_BYTES / FRAME_BYTES / 100


@dataclass(frozen=True)
class Plan:
    duration_s: float
    many_buffers: tuple[float, ...]
    many_losses: tuple[float, ...]
    heat_buffers: tuple[float, ...]
    heat_losses: tuple[float, ...]
    rtt_buffers: tuple[float, ...]
    retrans_flows: tuple[int, ...]
    delay_flows: tuple[int, ...]
    fct_buffers: tuple[float, ...]
    fct_size: str
    fct_duration_s: float
    loss_rates: tuple[float, ...]
    loss_buffers: tuple[float, ...]
    #: (BBR flows, CUBIC flows) of each AQM mix.
    aqm_mixes: tuple[tuple[int, int], ...]
    aqm_buffer_bdp: float
    #: `--cc`: a user's C source (its absolute path[:NAME], as specs name it) beside the BBRs.
    yours: str | None = None

    @property
    def bbrs(self) -> tuple[str, ...]:
        """What runs in BBR's place: the three versions, and the user's CC if given."""
        return (*BBRS, self.yours) if self.yours else BBRS

    @property
    def all_ccs(self) -> tuple[str, ...]:
        return (*self.bbrs, "cubic")


FULL = Plan(
    60, (0.01, 0.1, 1, 10, 100), (0.0, 0.01), (0.1, 1, 10), (0.0, 0.0001, 0.001, 0.01), (0.5, 2, 10),
    (1, 2, 5, 10, 25, 50, 100), (2, 10, 25, 50), (0.1, 0.5, 1, 10, 100), "100MB", 240,
    (0.0, 0.0001, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2), (0.1, 1), ((1, 1), (1, 10), (10, 10), (50, 50)), 1.0,
)  # fmt: skip
# A demo of every experiment in seconds: the shortest runs past the 5 s warm-up, one flow
# count of each kind the findings compare, one AQM mix, and A's 100 flows under the loss its
# findings judge only (its lossless runs were a third of the quick study's time).
QUICK = Plan(
    6, (0.1, 10), (0.01,), (0.1, 10), (0.0, 0.01), (2,), (1, 10), (2, 25), (0.1, 10), "10MB", 20,
    (0.0, 0.01, 0.05), (1,), ((1, 1),), 1.0,
)  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One of the slides' findings set beside ours."""

    experiment: str
    seed: str
    ours: str
    confirmed: bool | None

    def row(self) -> dict[str, str]:
        return {"experiment": self.experiment, "the slides": self.seed, "ours": self.ours, "verdict": verdict(self.confirmed)}


def link(rtt_ms: float, buffer: str, loss: float = 0.0, aqm: str = "fifo") -> dict:
    return {"rate_mbps": RATE_MBPS, "rtt_ms": rtt_ms, "buffer": buffer, "loss": loss, "aqm": aqm}


def buffer_bdp(value: str) -> float:
    return float(str(value).removesuffix("bdp"))


def label(cc: str) -> str:
    """A CC's name in tables and titles: a user's source by its results' name (FILE.c:MAP)."""
    return result_cc(cc) if is_source(cc) else cc_label(cc)


def result_cc(cc: str) -> str:
    """What results call the CC a spec names: a source's path becomes FILE.c:MAP."""
    return _source_label(cc) if is_source(cc) and Path(cc.partition(":")[0]).is_absolute() else cc


def slug(cc: str) -> str:
    """A CC's part of file and grid names: "yours" for a user's source."""
    return "yours" if is_source(cc) else cc


@lru_cache(maxsize=None)
def _source_label(cc: str) -> str:
    from cclab.spec.bpf_source import load as load_source

    return load_source(cc, Path.cwd()).label
