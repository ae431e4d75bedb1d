"""When BBR's first PROBE_RTT comes, on each engine of `cclab validate` folders.

    .venv/bin/python bench/probe_rtt_timing.py DIR [DIR ...]

For every BBR flow of every finished run: the first flow-series sample in PROBE_RTT, less
the flow's start and BBR's 10 s min_rtt window (`bbr_min_rtt_win_sec`). So it is when
the flow's min_rtt filter last found a new minimum, counted from its start: the handshake
(then the data begins two RTTs in, after iperf3's cookie), a data RTT in the first rounds,
or a timestamp RTT floored to the millisecond. Per case and engine: count and quartiles
(seconds, on the series' sample grid); then over all cases.
Why: min_rtt's age sets when PROBE_RTT drains the flow, and so what another flow's queue
holds when the next min_rtt is measured (docs/FIDELITY.md, model 18).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

MIN_RTT_WINDOW_S = 10.0  # tcp_bbr.c bbr_min_rtt_win_sec


def probe_rtt_delays(directory: Path) -> pd.DataFrame:
    rows = []
    for meta_path in sorted(directory.glob("runs/*/run.json")):
        run_dir = meta_path.parent
        if not (run_dir / "result.json").exists() or not (run_dir / "flow_series.parquet").exists():
            continue
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        flows = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))["flows"]
        series = pd.read_parquet(run_dir / "flow_series.parquet", columns=["time_s", "flow_id", "cc_mode"])
        for flow in flows:
            if flow["cc"] != "bbr":
                continue
            probing = series[(series.flow_id == flow["flow_id"]) & (series.cc_mode == "probe_rtt")]
            if len(probing):
                delay = probing.time_s.min() - flow["start_s"] - MIN_RTT_WINDOW_S
                rows.append({"case": meta["axis_values"].get("case"), "engine": meta["engine"].split("-")[0], "delay_s": delay})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", type=Path, nargs="+")
    args = parser.parse_args()
    delays = pd.concat([probe_rtt_delays(d) for d in args.dirs], ignore_index=True)
    if delays.empty:
        raise SystemExit("no BBR flow reached PROBE_RTT in these folders")
    quartiles = ["count", "25%", "50%", "75%", "max"]
    pd.set_option("display.width", 200)
    print(delays.groupby(["case", "engine"]).delay_s.describe()[quartiles].round(3).to_string())
    print(delays.groupby("engine").delay_s.describe()[["count", "mean", *quartiles[1:]]].round(3).to_string())


if __name__ == "__main__":
    main()
