"""`python -m cclab.engines.sim_child [compare]`: one simulation in a process of its own, for
a run whose congestion control is a user's native library (engines/native_cc.py). The resolved
config arrives on stdin, the result leaves on stdout; a config the simulator refuses exits
with status 3 and its one line on stderr, a run the user's CC broke (a window of 0) with 4.
A crash in the user's code ends this process only. With `compare`, stdin holds
{"config": ..., "candidate": flow} and stdout the comparison (engines/cc_compare.py).
`run_in_child` is the parent's side.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from cclab import _sim

REFUSED_EXIT = 3
FAILED_EXIT = 4


class ChildFailed(Exception):
    """The child's one line: why the simulation failed or what crashed it (`crashed`)."""

    def __init__(self, line: str, *, crashed: bool = False) -> None:
        super().__init__(line)
        self.crashed = crashed


def run_in_child(args: list[str], payload: str, sources: list[str], crashed: str) -> str:
    """stdout of `python -m cclab.engines.sim_child ARGS` fed `payload`; else ChildFailed with
    one line naming the user's `sources` (a crash: "... crashed `crashed` (SIGSEGV)")."""
    done = subprocess.run([sys.executable, "-m", "cclab.engines.sim_child", *args], input=payload, capture_output=True, text=True)
    if done.returncode == 0:
        return done.stdout
    names = ", ".join(sorted(set(sources)))
    if done.returncode < 0:
        raise ChildFailed(f"the congestion control {names} crashed {crashed} ({signal.Signals(-done.returncode).name})", crashed=True)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    why = lines[-1] if lines else f"exit status {done.returncode}"
    if done.returncode == FAILED_EXIT:
        why = why.replace("the congestion control", f"the congestion control {names}", 1)
    raise ChildFailed(why)


def main(args: list[str]) -> int:
    given = sys.stdin.read()
    try:
        if args == ["compare"]:
            request = json.loads(given)
            output = _sim.compare_json(json.dumps(request["config"]), json.dumps(request["candidate"]))
        else:
            output = _sim.run_json(given, None)
    except (ValueError, RuntimeError) as error:
        print(error, file=sys.stderr)
        return REFUSED_EXIT
    except BaseException as error:  # pyo3's PanicException: an assertion on the user's CC
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        print(str(error).splitlines()[0] if str(error) else type(error).__name__, file=sys.stderr)
        return FAILED_EXIT
    sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
