"""BBR versus CUBIC over a grid of networks: the paired table, goodput gain, latency
decrease, and the scikit-learn decision tree of Cao et al. (IMC 2019, section 4.1).

The input is a flows table (`cclab.store.load_flows`): one row per flow per run with
`rate_mbps`, `rtt_ms`, `buffer_bytes`, `cc` and the per-flow metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from sklearn.model_selection import KFold, StratifiedKFold
    from sklearn.tree import DecisionTreeClassifier

# scikit-learn (with scipy) and matplotlib are imported where a tree is fitted or drawn:
# together about 2.5 s, which `cclab recommend` (a walk of the stored tree) and every
# `cclab reproduce` before its runs start would otherwise pay.

NETWORK_KEYS = ("rate_mbps", "rtt_ms", "buffer_bytes")
PAIRED_METRICS = ("goodput_mbps", "retrans_segments", "data_segments_sent", "bottleneck_utilization", "fct_s")

# Features of the tree. The paper's are rate, RTT and buffer. The extended set adds the
# BDP and buffer/BDP: the paper explains its own tree in those terms (BBR keeps about
# 2 BDP in flight, so buffer < BDP is where it wins), and an axis-aligned tree over the
# raw three can only approximate the diagonal `buffer = BDP` with a staircase of splits.
PAPER_FEATURES = ("rate_mbps", "rtt_ms", "buffer_mb")
EXTENDED_FEATURES = ("rate_mbps", "rtt_ms", "buffer_mb", "bdp_mb", "buffer_bdp")
FEATURE_LABELS = {
    "rate_mbps": "rate (Mbit/s)",
    "rtt_ms": "RTT (ms)",
    "buffer_mb": "buffer (MB)",
    "bdp_mb": "BDP (MB)",
    "buffer_bdp": "buffer/BDP",
}
CLASSES = ("BBR", "CUBIC")

# Cao et al.: a 75/25 train/test split and 5-fold cross-validation.
TEST_FRACTION = 0.25
CV_FOLDS = 5
# Kept shallow so the drawn tree is readable, as the paper's Figure 4 (four levels) is.
MAX_DEPTH = 4
MIN_SAMPLES_LEAF = 3


def gain_pct(value: pd.Series | float, baseline: pd.Series | float) -> Any:
    """(value - baseline) / baseline x 100: GpGain with value = BBR, baseline = CUBIC.

    NaN where the baseline is zero or missing: a gain over nothing is undefined.
    """
    value = pd.to_numeric(value) if isinstance(value, pd.Series) else value
    baseline = pd.to_numeric(baseline) if isinstance(baseline, pd.Series) else baseline
    with np.errstate(divide="ignore", invalid="ignore"):
        result = (np.asarray(value, dtype=float) - np.asarray(baseline, dtype=float)) / np.asarray(baseline, dtype=float) * 100.0
    result = np.where(np.asarray(baseline, dtype=float) == 0, np.nan, result)
    if isinstance(value, pd.Series):
        return pd.Series(result, index=value.index)
    return float(result) if np.ndim(result) == 0 else result


def latency_decrease_pct(latency_bbr: pd.Series | float, latency_cubic: pd.Series | float) -> Any:
    """LatDec = (lat_CUBIC - lat_BBR) / lat_CUBIC x 100 (positive: BBR finishes sooner)."""
    gain = gain_pct(latency_bbr, latency_cubic)
    return -gain


def paired_table(flows: pd.DataFrame, metrics: Sequence[str] = PAIRED_METRICS, keys: Sequence[str] = NETWORK_KEYS) -> pd.DataFrame:
    """One row per network (`keys`) with `<metric>_bbr` and `<metric>_cubic` averaged over
    repetitions, plus `bdp_mb`, `buffer_mb`, `buffer_bdp`, `gain_pct`, `winner` and, from a
    flows table with verdicts, `transient` (a run of the network had not converged).

    Networks where only one of the two CCs ran are dropped.
    """
    present = [m for m in metrics if m in flows.columns]
    numeric = flows.assign(cc=flows["cc"].astype(str).str.lower())
    numeric = numeric.assign(**{m: pd.to_numeric(numeric[m], errors="coerce").astype(float) for m in present})
    means = numeric.groupby([*keys, "cc"], as_index=False)[present].mean()
    wide = means.pivot_table(index=list(keys), columns="cc", values=present, aggfunc="first", dropna=False)
    wide.columns = [f"{metric}_{cc}" for metric, cc in wide.columns]
    wide = wide.reset_index()
    needed = [f"goodput_mbps_{cc}" for cc in ("bbr", "cubic")]
    if not all(column in wide.columns for column in needed):
        return wide.iloc[0:0]
    wide = wide.dropna(subset=needed).reset_index(drop=True)
    wide["bdp_mb"] = wide["rate_mbps"] * wide["rtt_ms"] / 8e3  # Mbit/s x ms / 8 = kB; / 1e3 = MB
    wide["buffer_mb"] = wide["buffer_bytes"] / 1e6
    wide["buffer_bdp"] = wide["buffer_mb"] / wide["bdp_mb"]
    wide["gain_pct"] = gain_pct(wide["goodput_mbps_bbr"], wide["goodput_mbps_cubic"])
    if "steady_converged" in numeric.columns:
        # A network is transient when any of its runs (either CC, any repetition) had not converged.
        unsettled = numeric.assign(_t=numeric["steady_converged"].eq(False).fillna(False)).groupby(list(keys))["_t"].any()
        wide["transient"] = wide.set_index(list(keys)).index.map(unsettled).fillna(False).astype(bool)
    # Ties go to CUBIC: the default in Linux, and BBR costs retransmissions.
    wide["winner"] = np.where(wide["goodput_mbps_bbr"] > wide["goodput_mbps_cubic"], "BBR", "CUBIC")
    return wide


@dataclass
class TreeFit:
    """A decision tree fitted on the 75% training split, with its held-out and
    cross-validated accuracies."""

    model: DecisionTreeClassifier
    features: tuple[str, ...]
    test_accuracy: float
    cv_scores: np.ndarray
    n_train: int
    n_test: int

    @property
    def cv_mean(self) -> float:
        return float(np.mean(self.cv_scores))

    @property
    def cv_median(self) -> float:
        return float(np.median(self.cv_scores))


def new_classifier(seed: int = 0) -> DecisionTreeClassifier:
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier(max_depth=MAX_DEPTH, min_samples_leaf=MIN_SAMPLES_LEAF, random_state=seed)


def _folds(labels: np.ndarray, seed: int) -> KFold | StratifiedKFold:
    from sklearn.model_selection import KFold, StratifiedKFold

    _, counts = np.unique(labels, return_counts=True)
    splits = min(CV_FOLDS, len(labels))
    if len(counts) > 1 and counts.min() >= splits:
        return StratifiedKFold(n_splits=splits, shuffle=True, random_state=seed)
    # A class too small to appear in every fold (small quick grids): plain shuffled folds.
    return KFold(n_splits=splits, shuffle=True, random_state=seed)


def fit_tree(table: pd.DataFrame, features: Sequence[str] = PAPER_FEATURES, *, seed: int = 0) -> TreeFit:
    """Fit the tree on a 75/25 split of `paired_table` rows and cross-validate it (5 folds
    over all rows). Raises ValueError when there are too few rows to split."""
    from sklearn.model_selection import cross_val_score, train_test_split

    if len(table) < 4:
        raise ValueError(f"a decision tree needs at least 4 networks, got {len(table)}")
    X = table[list(features)].to_numpy(dtype=float)
    y = table["winner"].to_numpy(dtype=str)
    _, counts = np.unique(y, return_counts=True)
    stratify = y if len(counts) > 1 and counts.min() >= 2 else None
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=TEST_FRACTION, random_state=seed, stratify=stratify)
    model = new_classifier(seed).fit(X_train, y_train)
    test_accuracy = float(np.mean(model.predict(X_test) == y_test))
    cv_scores = cross_val_score(new_classifier(seed), X, y, cv=_folds(y, seed), scoring="accuracy")
    return TreeFit(model, tuple(features), test_accuracy, np.asarray(cv_scores, dtype=float), len(y_train), len(y_test))


def accuracy_across_seeds(tables: dict[int, pd.DataFrame], features: Sequence[str] = PAPER_FEATURES, *, seed: int = 0) -> dict[str, Any] | None:
    """How well a tree trained on one seed's outcomes predicts another seed's: for every
    ordered pair of repetitions (a, b), a tree fitted on all of a's networks is scored on
    b's labels, beside its score on a's own (its training accuracy, what a single-seed study
    sees). `tables` is one `paired_table` per repetition; None with fewer than two.

    `label_agreement` is the share of networks whose winner is the same in every seed; on the
    others no single answer is right for every seed, whatever the tree."""
    tables = {r: t for r, t in tables.items() if len(t) >= 4}
    if len(tables) < 2:
        return None
    keys = [k for k in NETWORK_KEYS if all(k in t.columns for t in tables.values())]
    data = {r: (t[list(features)].to_numpy(dtype=float), t["winner"].to_numpy(dtype=str)) for r, t in tables.items()}
    own, other = [], []
    for a, (X_train, y_train) in data.items():
        model = new_classifier(seed).fit(X_train, y_train)
        for b, (X, y) in data.items():
            (own if b == a else other).append(float(np.mean(model.predict(X) == y)))
    winners = pd.concat([t.set_index(keys)["winner"].rename(r) for r, t in tables.items()], axis=1, join="inner")
    return {
        "seeds": len(tables),
        "own_seed_accuracy": float(np.median(own)),
        "other_seed_accuracy_median": float(np.median(other)),
        "other_seed_accuracy_min": float(np.min(other)),
        "other_seed_accuracy_max": float(np.max(other)),
        "label_agreement": float(winners.nunique(axis=1).eq(1).mean()) if len(winners) else float("nan"),
        "networks": len(winners),
    }


def tree_figure(fit: TreeFit, title: str) -> Figure:
    """The tree drawn like the paper's Figure 4: condition, samples, class counts, decision;
    orange for BBR, blue for CUBIC, colour intensity from the Gini impurity."""
    from sklearn.tree import plot_tree

    from cclab.analysis.figures import new_figure

    depth = fit.model.get_depth()
    leaves = fit.model.get_n_leaves()
    figure = new_figure(max(10.0, 2.4 * leaves), 2.4 * (depth + 1) + 1.0)
    ax = figure.add_subplot()
    plot_tree(
        fit.model,
        ax=ax,
        feature_names=[FEATURE_LABELS.get(f, f) for f in fit.features],
        class_names=[str(c) for c in fit.model.classes_],
        filled=True,
        impurity=True,
        proportion=False,
        rounded=True,
        fontsize=10,
    )
    ax.set_title(title, fontsize=10)
    return figure


def tree_to_dict(model: DecisionTreeClassifier, features: Sequence[str]) -> dict[str, Any]:
    """The fitted tree as plain JSON data: one entry per node with its split (or -1 at a
    leaf), children, sample count and class counts. Readable without scikit-learn or
    pickle, so a stored model cannot execute code and survives library upgrades."""
    tree = model.tree_
    nodes = []
    for node in range(tree.node_count):
        samples = int(tree.n_node_samples[node])
        # scikit-learn >= 1.4 stores class fractions in `value`; turn them into counts.
        fractions = tree.value[node][0] / tree.value[node][0].sum()
        counts = [int(round(f * samples)) for f in fractions]
        leaf = tree.children_left[node] == -1
        nodes.append(
            {
                "feature": None if leaf else features[int(tree.feature[node])],
                "threshold": None if leaf else float(tree.threshold[node]),
                "left": None if leaf else int(tree.children_left[node]),
                "right": None if leaf else int(tree.children_right[node]),
                "samples": samples,
                "counts": dict(zip([str(c) for c in model.classes_], counts, strict=True)),
            }
        )
    return {"features": list(features), "classes": [str(c) for c in model.classes_], "nodes": nodes}


def walk_tree(tree: dict[str, Any], point: dict[str, float]) -> tuple[dict[str, Any], list[str]]:
    """The leaf reached by `point` (feature name -> value) and the conditions on the way,
    as text (`RTT (ms) <= 87.5`); left is `<=`, as in scikit-learn."""
    node = tree["nodes"][0]
    path: list[str] = []
    while node["feature"] is not None:
        label = FEATURE_LABELS.get(node["feature"], node["feature"])
        if point[node["feature"]] <= node["threshold"]:
            path.append(f"{label} <= {node['threshold']:.4g}")
            node = tree["nodes"][node["left"]]
        else:
            path.append(f"{label} > {node['threshold']:.4g}")
            node = tree["nodes"][node["right"]]
    return node, path


def features_of(rate_mbps: float, rtt_ms: float, buffer_bytes: float) -> dict[str, float]:
    """Every tree feature of one network, computed as `paired_table` computes them."""
    bdp_mb = rate_mbps * rtt_ms / 8e3
    buffer_mb = buffer_bytes / 1e6
    return {"rate_mbps": rate_mbps, "rtt_ms": rtt_ms, "buffer_mb": buffer_mb, "bdp_mb": bdp_mb, "buffer_bdp": buffer_mb / bdp_mb}
