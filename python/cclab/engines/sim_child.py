"""`python -m cclab.engines.sim_child`: one simulation in a process of its own, for a run
whose congestion control is a user's native library (engines/native_cc.py). The resolved
config arrives on stdin, the result leaves on stdout; a config the simulator refuses exits
with status 3 and its one line on stderr. A crash in the user's code ends this process only.
"""

from __future__ import annotations

import sys

from cclab import _sim

REFUSED_EXIT = 3


def main() -> int:
    config_json = sys.stdin.read()
    try:
        output = _sim.run_json(config_json, None)
    except (ValueError, RuntimeError) as error:
        print(error, file=sys.stderr)
        return REFUSED_EXIT
    sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
