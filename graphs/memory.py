"""How much memory the machine can still give (for refusing graphs and sizing batches)."""
from __future__ import annotations

import os


def available_memory() -> int:
    """Bytes the kernel can hand out now without swapping (MemAvailable on Linux, else the free
    physical pages; unbounded where neither is known)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62
