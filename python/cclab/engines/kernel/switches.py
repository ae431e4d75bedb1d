"""How a user forces one of the kernel engine's paths: a config key, else an environment variable."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from cclab.engines.kernel.errors import KernelEngineError

AUTO = "auto"


def requested(config: Mapping, config_key: str, env: str, choices: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(the path asked for, where the request came from): the config key wins over $env; "auto" by default."""
    environ = os.environ if environ is None else environ
    if config.get(config_key) is not None:
        value, source = str(config[config_key]), f"config {config_key}"
    elif environ.get(env):
        value, source = environ[env], f"environment {env}"
    else:
        return AUTO, "default"
    value = value.strip().lower()
    if value not in choices:
        raise KernelEngineError(f"{source} must be one of {', '.join(choices)} (got {value!r})")
    return value, source
