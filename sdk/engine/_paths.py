"""Where the SDK keeps what it builds once per machine (converted tokenizers, indexes,
compiled kernels): one root, one environment variable."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_dir"]


def default_cache_dir() -> Path:
    """Root of every on-disk cache of the SDK: ``$SDK_CACHE_DIR`` or ``~/.cache/sdk``."""
    env = os.environ.get("SDK_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "sdk"
