"""`cclab recommend`: BBR or CUBIC for a network, from a stored cao2019 study.

`--bbr` chooses which BBR is weighed against CUBIC: BBRv1 (the paper's, the default), or
BBRv2 / BBRv3, whose own models (the same grid, that version against CUBIC, its own tree)
sit under `versions` in the model.

The model (`model.json`, written by the cao2019 study) holds
- the decision tree, refitted on every network of the grid, as plain JSON
  (`decision_tree.tree_to_dict`): the choice and its confidence (the leaf's purity
  and training-sample count);
- the grid table: each network's measured goodput and retransmissions for both CCs,
  which give the expected goodput and retransmission cost at the nearest network
  studied (nearest in log rate, log RTT and log buffer, the axes the grid is spaced on);
- the studied ranges, outside which we refuse to answer rather than extrapolate.

Random loss. The cao2019 grid has none, so a query with `--loss > 0` is answered from
the random-loss curves of the rebbr study (100 Mbit/s, 100 ms, 0.001% to 50% loss):
- BBR's loss response is relative to its own rate (it keeps pacing at its bandwidth
  estimate until gain x (1 - p) < 1), so its goodput is the grid's loss-free value
  times the measured fraction goodput(p) / goodput(0);
- CUBIC's is not: loss limits its window, so its goodput is capped by a loss-limited
  rate that scales as 1/RTT at a given loss (Mathis et al. 1997, throughput
  ~ MSS / (RTT sqrt(p))). We take the measured CUBIC goodput at p at 100 ms, scale it
  by 100 ms / RTT and cap the grid's loss-free value with it. Where the measured curve
  is still within 10% of its loss-free value, loss is not limiting at the reference and
  the grid value stands.
The choice is then the CC with the higher estimate, and the output says it came from
this scaling, not from a measured network. A loss above the largest studied (50%) is
refused.

The bundled default (`cclab/data/recommend_model.json`) is the simulator's full cao2019
study plus the rebbr loss curves, built with `bundle()`:

    make recommend-model    # cclab reproduce cao2019 and rebbr (full, simulator), then bundle()
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cclab.analysis import decision_tree as dt
from cclab.errors import SpecError

if TYPE_CHECKING:
    import os

MODEL_FILE = "model.json"
LOSS_CURVES_FILE = "loss_curves.json"
BUNDLED_MODEL = "recommend_model.json"
MODEL_FORMAT = 1
# Where the rebbr CUBIC curve is still above this fraction of its loss-free goodput,
# loss is not what limits CUBIC at the reference network (see the module docstring).
NOT_LOSS_LIMITED_FRACTION = 0.9
GRID_COLUMNS = (
    "rate_mbps", "rtt_ms", "buffer_bytes",
    "goodput_mbps_bbr", "goodput_mbps_cubic",
    "retrans_segments_bbr", "retrans_segments_cubic",
    "loss_pct_bbr", "loss_pct_cubic",
)


def model_from_study(table: pd.DataFrame, *, engine: str, quick: bool, duration_s: float, fits: dict[str, dt.TreeFit]) -> dict[str, Any]:
    """The recommend model of a cao2019 grid (`cao2019.goodput_table`): the tree whose
    features gave the higher mean CV accuracy (the paper's on a tie), refitted on every
    network, and the grid table."""
    choice = max(fits, key=lambda name: (round(fits[name].cv_mean, 6), name == "paper"))
    chosen = fits[choice]
    model = dt.new_classifier().fit(table[list(chosen.features)].to_numpy(dtype=float), table["winner"].to_numpy(dtype=str))
    # A network whose runs had not converged is marked, so answers resting on it say so.
    columns = [*GRID_COLUMNS, *(["transient"] if "transient" in table.columns else [])]
    grid = table[columns].astype(float)
    return {
        "format": MODEL_FORMAT,
        "source": "cao2019",
        "engine": engine,
        "quick": quick,
        "duration_s": duration_s,
        "tree_choice": choice,
        "cv": {name: {"mean": fit.cv_mean, "median": fit.cv_median, "test": fit.test_accuracy} for name, fit in fits.items()},
        "ranges": {column: [float(grid[column].min()), float(grid[column].max())] for column in ("rate_mbps", "rtt_ms", "buffer_bytes")},
        "tree": dt.tree_to_dict(model, chosen.features),
        "grid": {column: grid[column].tolist() for column in columns},
    }


def bundle(cao2019_dir: str | os.PathLike[str], rebbr_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Write the default model: a cao2019 study's model plus a rebbr study's loss curves."""
    model = json.loads((Path(cao2019_dir) / MODEL_FILE).read_text(encoding="utf-8"))
    model["loss_curves"] = json.loads((Path(rebbr_dir) / LOSS_CURVES_FILE).read_text(encoding="utf-8"))
    target = Path(out) if out is not None else Path(str(resources.files("cclab") / "data" / BUNDLED_MODEL))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(model, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return target


def load_model(study: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], str]:
    """The model of a study folder (`DIR/model.json`), or the bundled default; and a
    one-phrase description of where it came from."""
    if study is None:
        text = (resources.files("cclab") / "data" / BUNDLED_MODEL).read_text(encoding="utf-8")
        model = json.loads(text)
        return model, f"bundled default (cao2019 on the {model['engine']} engine)"
    path = Path(study) / MODEL_FILE
    if not path.is_file():
        raise SpecError(f"--study {study}: no {MODEL_FILE} there; run `cclab reproduce cao2019 --out {study}` first")
    model = json.loads(path.read_text(encoding="utf-8"))
    if model.get("format") != MODEL_FORMAT:
        raise SpecError(f"--study {study}: {MODEL_FILE} has format {model.get('format')!r}, expected {MODEL_FORMAT}; rerun the study")
    if "loss_curves" not in model:
        curves = Path(study).parent / "rebbr" / LOSS_CURVES_FILE
        if curves.is_file():
            model["loss_curves"] = json.loads(curves.read_text(encoding="utf-8"))
    return model, f"study {study} (cao2019 on the {model['engine']} engine{', quick subset' if model.get('quick') else ''})"


#: The BBR versions a model can weigh against CUBIC ("bbr" is BBRv1).
BBR_VERSIONS = ("bbr", "bbr2", "bbr3")
BBR_LABELS = {"bbr": "BBR", "bbr2": "BBRv2", "bbr3": "BBRv3"}


def side_label(model: dict[str, Any], bbr: str) -> str:
    """What the side weighed against CUBIC is called: a user's CC by its label (a model from
    `cclab reproduce cao2019 --cc FILE`), else the BBR version."""
    return str(model.get("contender", BBR_LABELS[bbr])) if bbr == "bbr" else BBR_LABELS.get(bbr, bbr)


def version_model(model: dict[str, Any], bbr: str) -> dict[str, Any]:
    """The model that weighs `bbr` against CUBIC: the top level for BBRv1, else `versions[bbr]`
    (with the top level's random-loss curves); one SpecError line if the model lacks it."""
    if bbr not in BBR_VERSIONS:
        raise SpecError(f"--bbr = {bbr!r} must be one of {', '.join(BBR_VERSIONS)}")
    if bbr == "bbr":
        return model
    versions = model.get("versions", {})
    if bbr not in versions:
        raise SpecError(f"--bbr {bbr}: this model has no {BBR_LABELS[bbr]} grid; rebuild it with `make recommend-model` or rerun cao2019")
    return {**versions[bbr], "loss_curves": model.get("loss_curves")}


@dataclass
class Recommendation:
    choice: str
    goodput_mbps: dict[str, float]
    retrans_segments: dict[str, float]
    loss_pct: dict[str, float]
    nearest: dict[str, float]
    leaf_samples: int
    leaf_purity: float
    leaf_counts: dict[str, int]
    path: list[str]
    tree_choice: str
    basis: str
    notes: list[str] = field(default_factory=list)
    bbr: str = "bbr"  # which BBR was weighed against CUBIC

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _check_range(model: dict[str, Any], name: str, value: float, show: str, unit_scale: float, unit: str) -> None:
    low, high = model["ranges"][name]
    if not (low * (1 - 1e-9) <= value <= high * (1 + 1e-9)):
        raise SpecError(
            f"{show} = {value / unit_scale:g} {unit} is outside the studied range "
            f"{low / unit_scale:g}-{high / unit_scale:g} {unit}; the model does not extrapolate"
        )


def _nearest(model: dict[str, Any], rate_mbps: float, rtt_ms: float, buffer_bytes: float) -> dict[str, float]:
    grid = pd.DataFrame(model["grid"])
    distance = (
        (np.log10(grid["rate_mbps"]) - math.log10(rate_mbps)) ** 2
        + (np.log10(grid["rtt_ms"]) - math.log10(rtt_ms)) ** 2
        + (np.log10(grid["buffer_bytes"]) - math.log10(buffer_bytes)) ** 2
    )
    return {key: float(value) for key, value in grid.loc[distance.idxmin()].items()}


def _curve_at(curve: dict[str, list[float]], loss: float) -> float:
    """A measured goodput curve at `loss`: linear in log(loss) between measured points,
    linear in loss between 0 and the first nonzero point."""
    losses = np.asarray(curve["loss"], dtype=float)
    goodputs = np.asarray(curve["goodput_mbps"], dtype=float)
    order = np.argsort(losses)
    losses, goodputs = losses[order], goodputs[order]
    if loss <= losses[0]:
        return float(goodputs[0])
    upper = int(np.searchsorted(losses, loss))
    if upper >= len(losses):
        return float(goodputs[-1])
    x0, x1, y0, y1 = losses[upper - 1], losses[upper], goodputs[upper - 1], goodputs[upper]
    t = (loss - x0) / (x1 - x0) if x0 <= 0 else (math.log(loss) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return float(y0 + t * (y1 - y0))


def recommend(model: dict[str, Any], *, rate_mbps: float, rtt_ms: float, buffer_bytes: float, loss: float = 0.0, bbr: str = "bbr") -> Recommendation:
    """The recommendation for one network, `bbr` (a BBR version) or CUBIC; SpecError (one line)
    outside the studied ranges. The choice is named as BBR_LABELS names `bbr` ("BBR" for v1)."""
    label = side_label(model, bbr)
    model = version_model(model, bbr)
    _check_range(model, "rate_mbps", rate_mbps, "--rate", 1.0, "Mbit/s")
    _check_range(model, "rtt_ms", rtt_ms, "--rtt", 1.0, "ms")
    _check_range(model, "buffer_bytes", buffer_bytes, "--buffer", 1e6, "MB")
    if not 0 <= loss < 1:
        raise SpecError(f"--loss = {loss:g} must be a probability in [0, 1)")
    nearest = _nearest(model, rate_mbps, rtt_ms, buffer_bytes)
    leaf, path = dt.walk_tree(model["tree"], dt.features_of(rate_mbps, rtt_ms, buffer_bytes))
    # Trees label the BBR side "BBR" whatever its version.
    counts = {(label if name == "BBR" else name): int(n) for name, n in leaf["counts"].items()}
    majority = max(counts, key=counts.get)
    goodput = {cc: nearest[f"goodput_mbps_{cc}"] for cc in ("bbr", "cubic")}
    notes: list[str] = []
    basis = "decision tree"
    choice = majority
    if loss > 0:
        curves = model.get("loss_curves")
        if curves is None:
            raise SpecError("--loss: this model has no random-loss curves; run `cclab reproduce rebbr` into DIR/../rebbr or use the bundled model")
        studied = max(max(c["loss"]) for c in curves["curves"].values())
        if loss > studied:
            raise SpecError(f"--loss = {loss:g} is above the largest random loss studied ({studied:g})")
        if bbr not in curves["curves"]:
            raise SpecError(f"--loss with --bbr {bbr}: the random-loss curves have no {label}; rerun `cclab reproduce rebbr`")
        bbr_curve, cubic_curve = curves["curves"][bbr], curves["curves"]["cubic"]
        goodput["bbr"] *= _curve_at(bbr_curve, loss) / _curve_at(bbr_curve, 0.0)
        cubic_ref = _curve_at(cubic_curve, loss)
        if cubic_ref < NOT_LOSS_LIMITED_FRACTION * _curve_at(cubic_curve, 0.0):
            goodput["cubic"] = min(goodput["cubic"], cubic_ref * curves["rtt_ms"] / rtt_ms)
        choice = label if goodput["bbr"] > goodput["cubic"] else "CUBIC"
        basis = f"random-loss curves measured at {curves['rate_mbps']:g} Mbit/s, {curves['rtt_ms']:g} ms (rebbr), scaled to this network"
        notes.append(
            "with random loss the goodputs are estimates: BBR's loss-free value times its measured fraction at this loss; "
            "CUBIC's capped by its measured loss-limited rate scaled by 1/RTT (Mathis)"
        )
        if choice != majority:
            notes.append(f"without loss the tree would choose {majority}")
    else:
        measured = label if goodput["bbr"] > goodput["cubic"] else "CUBIC"
        if measured != choice:
            notes.append(f"the nearest studied network measured {measured} ahead; the tree generalises over its neighbours")
    if nearest.get("transient", 0.0) > 0:
        notes.append(
            "the nearest studied network's runs had not converged (a transient): its goodputs may change in longer runs"
        )
    return Recommendation(
        choice=choice,
        goodput_mbps=goodput,
        retrans_segments={cc: nearest[f"retrans_segments_{cc}"] for cc in ("bbr", "cubic")},
        loss_pct={cc: nearest[f"loss_pct_{cc}"] for cc in ("bbr", "cubic")},
        nearest={key: nearest[key] for key in ("rate_mbps", "rtt_ms", "buffer_bytes")},
        leaf_samples=int(leaf["samples"]),
        leaf_purity=counts[majority] / leaf["samples"],
        leaf_counts=counts,
        path=path,
        tree_choice=majority,
        basis=basis,
        notes=notes,
        bbr=bbr,
    )


def _size(buffer_bytes: float) -> str:
    return f"{buffer_bytes / 1e3:g} KB" if buffer_bytes < 1e6 else f"{buffer_bytes / 1e6:g} MB"


def render(rec: Recommendation, *, rate_mbps: float, rtt_ms: float, buffer_bytes: float, loss: float, model: dict[str, Any], source: str) -> str:
    """The answer as a few plain lines for a terminal."""
    n = rec.nearest
    duration = model["duration_s"]
    label = side_label(model, rec.bbr)
    model = version_model(model, rec.bbr)
    lines = [
        f"recommendation: {rec.choice}   ({rate_mbps:g} Mbit/s, {rtt_ms:g} ms RTT, {_size(buffer_bytes)} buffer, "
        + (f"{loss * 100:g}% random loss)" if loss else "no random loss)"),
        f"expected goodput: {label} {rec.goodput_mbps['bbr']:.1f} Mbit/s, CUBIC {rec.goodput_mbps['cubic']:.1f} Mbit/s "
        f"(measured at the nearest studied network: {n['rate_mbps']:g} Mbit/s, {n['rtt_ms']:g} ms, {_size(n['buffer_bytes'])}"
        + (", then scaled for loss)" if loss else ")"),
        f"retransmission cost there: {label} {rec.loss_pct['bbr']:.2f}% of segments sent ({rec.retrans_segments['bbr']:,.0f} in {duration:g} s), "
        f"CUBIC {rec.loss_pct['cubic']:.2f}% ({rec.retrans_segments['cubic']:,.0f})"
        + (f"; random loss adds about {loss * 100:g}% of segments sent for either" if loss else ""),
        ("confidence: low, an estimate scaled from one network's loss curves; without loss, " if loss else "confidence: ")
        + f"tree leaf of {rec.leaf_samples} studied networks, {rec.leaf_purity:.0%} {rec.tree_choice} "
        f"({', '.join(f'{k} {v}' for k, v in rec.leaf_counts.items())}); path: {' and '.join(rec.path) or 'root'}",
        f"basis: {rec.basis}; model: {source}, {model['tree_choice']} features, "
        f"5-fold CV accuracy {model['cv'][model['tree_choice']]['mean']:.1%} mean",
    ]
    lines += [f"note: {note}" for note in rec.notes]
    return "\n".join(lines)
