"""What the running kernel was built with: its CONFIG_* options, from /proc/config.gz or modinfo.

Its own module because both the preflight and the netem probe read it.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
from functools import lru_cache


@lru_cache(maxsize=1)
def kernel_config() -> dict[str, str]:
    """CONFIG_* values from /proc/config.gz, or {} where the kernel does not expose it."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if line.startswith("CONFIG_") and "=" in line)


def kernel_has(option: str, module: str) -> bool | None:
    """True/False from the kernel config or modinfo; None if neither can tell."""
    config = kernel_config()
    if config:
        return config.get(option) in ("y", "m")
    if shutil.which("modinfo"):
        return subprocess.run(["modinfo", module], capture_output=True).returncode == 0
    return None
