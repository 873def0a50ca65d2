"""Run ``python -m federation ...`` under cProfile counting CPU time, not wall time.

Used by ``propagation_bench.py --profile-cpu FILE``. On this shared 2-core machine a
wall-clock profile charges our functions for the time other processes held the CPU;
``time.process_time`` charges only this process's own CPU. The profile is written when
the control plane exits (SIGTERM from the bench's stop), to be read with ``pstats``::

    python -m pstats FILE   # then: sort tottime / stats 30
"""

from __future__ import annotations

import cProfile
import signal
import sys
import time
from types import FrameType


def main() -> None:
    out = sys.argv[1]
    sys.argv = ["fedctl", *sys.argv[2:]]
    profiler = cProfile.Profile(time.process_time)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    profiler.enable()
    try:
        from federation.cli import main as fedctl

        fedctl()
    finally:
        profiler.disable()
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
