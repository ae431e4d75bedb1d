"""Writes the example traces beside this file (Mahimahi format: one millisecond per line,
each a delivery opportunity for one 1500-byte packet). Seeded: the same files every time.

    .venv/bin/python examples/traces/make_traces.py
"""

from pathlib import Path

from cclab.studies.changing_links import write_traces

if __name__ == "__main__":
    for path in write_traces(Path(__file__).resolve().parent).values():
        print(f"wrote {path}")
