"""Studies: one module per reproduced paper or experiment, found automatically.

Every module of this package whose name does not start with `_` is a study (helpers
shared by studies start with `_`). It must define `NAME` (see below),
`DESCRIPTION` (one line) and

    def run(out_dir: Path, *, engine: str = "sim", quick: bool = False,
            jobs: int | None = None, include_invalid: bool = False) -> Path

which writes its sweep under `out_dir/runs/`, its figures (PNG and SVG) and
`summary.md` into `out_dir`, and returns the path of `summary.md`. A study that can put a
user's congestion control in BBR's place also takes `cc: str | None` (`--cc FILE.c`).

Adding a study is adding a file: nothing here needs editing. Its NAME is its module's
name with hyphens for underscores (`fairness_share.py` is `fairness-share`), so a study is
found without importing the others (each pulls in pandas, matplotlib or scipy: 2.5 s for all).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

from cclab.errors import SpecError


def module_name(name: str) -> str:
    """The module of study `name` (hyphens become underscores)."""
    return name.replace("-", "_")


def names() -> list[str]:
    """Every study's NAME, from the module names alone, sorted."""
    return sorted(info.name.replace("_", "-") for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def discover() -> dict[str, ModuleType]:
    """Every study module of this package, keyed by its NAME, sorted by name.

    A module that fails to import is an error, not a silently missing study: a
    broken study should be noticed by whoever runs `cclab reproduce`.
    """
    return {name: _load(name) for name in names()}


def _load(name: str) -> ModuleType:
    """Study `name`'s module, which must define that NAME."""
    module = importlib.import_module(f"{__name__}.{module_name(name)}")
    if getattr(module, "NAME", None) != name:
        raise RuntimeError(f"study module {module.__name__} defines NAME = {getattr(module, 'NAME', None)!r}; "
                           f"its NAME must be its module's name with hyphens, {name!r}")  # fmt: skip
    return module


def get_study_name(name: str) -> str:
    """`name` if a study has it, else a one-line SpecError listing the known ones."""
    known = names()
    if name not in known:
        raise SpecError(f"unknown study {name!r}; known studies: {', '.join(known) or '(none)'}")
    return name


def get_study(name: str) -> ModuleType:
    """The study called `name`, or a one-line SpecError listing the known ones."""
    return _load(get_study_name(name))


def study_cc(name: str, cc: str) -> str:
    """`--cc`: the user's CC for study `name` if its `run` takes one (in BBR's place), else a
    one-line SpecError; decided before the study is imported."""
    get_study_name(name)
    if not _run_takes_cc(name):
        takers = ", ".join(study for study in names() if _run_takes_cc(study))
        raise SpecError(f"--cc: the study {name} has no place for a congestion control of yours; these do: {takers}")
    return cc


def _run_takes_cc(name: str) -> bool:
    """Whether study `name`'s `run` has a `cc` parameter, read from its source: importing every
    study to ask would take seconds."""
    import ast

    package = Path(__file__).parent / module_name(name)
    source = package / "__init__.py" if package.is_dir() else package.with_suffix(".py")
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name == "run":
            return any(arg.arg == "cc" for arg in (*node.args.args, *node.args.kwonlyargs))
    return False


def run_study(study: ModuleType, out_dir: Path, *, seeds: int = 1, **options: Any) -> Path:
    """Run `study` into `out_dir` (each point with at least `seeds` seeds) and end its
    summary.md with how many of its runs were still transient (cclab.analysis.steady) and
    how far its points moved between seeds, which every study's numbers depend on."""
    from cclab.analysis.steady import transient_note
    from cclab.store import load_flows

    import matplotlib.pyplot as plt

    from cclab.analysis.figures import save_figure
    from cclab.analysis.spread import seed_spread, seed_spread_note, spread_figure
    from cclab.studies._common import study_call

    with study_call(seeds) as call:
        summary = Path(study.run(Path(out_dir), **options))
    flows = load_flows(out_dir)
    if call.run_keys and not flows.empty:
        # This call's runs only: the folder may hold runs of an older model or grid.
        flows = flows[flows["run_key"].isin(call.run_keys)].reset_index(drop=True)
    spread_note = seed_spread_note(flows)
    if seeds > 1 and not flows.empty:
        table = seed_spread(flows)
        table.to_csv(Path(out_dir) / "spread.csv", index=False)
        figure = spread_figure(table, getattr(study, "NAME", "study"))
        save_figure(figure, Path(out_dir) / "figures", "spread")
        plt.close(figure)
        spread_note += "\n\n![spread](figures/spread.png)"
    text = summary.read_text(encoding="utf-8").rstrip("\n")
    summary.write_text(f"{text}\n\n## Steady state\n\n{transient_note(flows)}\n\n## Run-to-run spread\n\n{spread_note}\n", encoding="utf-8")
    return summary
