"""Analysis: pure functions over the DataFrames of `cclab.store.load_flows` and friends.

Nothing here runs an engine or reads the disk except to save a figure.

- `figures`: heatmaps with values in their cells (diverging and centred on zero for
  gains), line plots, and saving a figure as PNG and SVG.
- `decision_tree`: BBR-vs-CUBIC paired table, goodput gain, the scikit-learn tree.
- `loss`: loss percentage, the ideal goodput under random loss, cliff detection.
- `recommend`: the stored model behind `cclab recommend`.
- `fairness`, `queue`, `oscillation`, `timeseries`: multi-flow analyses (issue 5).
"""
