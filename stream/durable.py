"""Durable file names: what every writer of a file that must survive a crash shares."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_folder(folder: Path) -> None:
    """A new or replaced file's name survives a power cut once its folder is synced, not only
    the file's bytes."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
