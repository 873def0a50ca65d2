"""Run ``python -m federation ...`` under cProfile counting CPU time, not wall time.

Used by ``propagation_bench.py --profile-cpu FILE``. On this shared 2-core machine a
wall-clock profile charges our functions for the time other processes held the CPU;
``time.process_time`` charges only this process's own CPU. Signals let the bench profile
just the window it measures:

- SIGUSR1 starts over: what was counted so far (start-up, cache sync) is dropped;
- SIGUSR2 writes what was counted since to ``FILE.window`` (the process goes on);
- at exit (SIGTERM from the bench's stop) everything since the last SIGUSR1 goes to FILE.

Read either with ``pstats`` (``python -m pstats FILE``, then ``sort tottime``, ``stats 30``)
or with :func:`summary` (what the bench prints).
"""

from __future__ import annotations

import collections
import cProfile
import pstats
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType


class WindowProfiler:
    """One cProfile on the process's CPU clock, restartable and dumpable from signals."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.profiler = cProfile.Profile(time.process_time)

    def restart(self, signum: int = 0, frame: FrameType | None = None) -> None:
        self.profiler.disable()
        self.profiler = cProfile.Profile(time.process_time)
        self.profiler.enable()

    def dump_window(self, signum: int = 0, frame: FrameType | None = None) -> None:
        self.profiler.disable()
        try:
            self.profiler.dump_stats(f"{self.out}.window")
        finally:
            self.profiler.enable()


def main() -> None:
    if sys.argv[1:2] == ["--compare"]:
        # python bench/cpu_profile.py --compare BEFORE AFTER TEMPLATES
        before, after, per = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(compare(before, after, per))
        return
    out = sys.argv[1]
    sys.argv = ["fedctl", *sys.argv[2:]]
    window = WindowProfiler(out)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, window.restart)
    signal.signal(signal.SIGUSR2, window.dump_window)
    window.profiler.enable()
    try:
        from federation.cli import main as fedctl

        fedctl()
    finally:
        window.profiler.disable()
        window.profiler.dump_stats(out)


# -- reading a profile -------------------------------------------------------------------

Entry = tuple[str, float, float, int]
"""(function, own CPU s, CPU s with callees, calls)."""


def where(key: tuple[str, int, str]) -> str:
    """``path:line(function)`` shortened to the package path (``federation/...``,
    ``json/...``, ``aiohttp/...``) or ``{built-in}``."""
    path, line, function = key
    if path == "~":
        return function
    for marker in ("/site-packages/", "/federation/", "/lib/python3"):
        if marker in path:
            tail = path.split(marker, 1)[1]
            if marker == "/federation/":
                tail = "federation/" + tail
            elif marker == "/lib/python3":
                tail = tail.split("/", 1)[1] if "/" in tail else tail
            return f"{tail}:{line}({function})"
    return f"{path}:{line}({function})"


def group_of(key: tuple[str, int, str]) -> str:
    """The module a function's own time is charged to: ``federation/contexts/client.py``,
    ``json``, ``aiohttp``, ``asyncio``, ``builtins`` ..."""
    path, _, function = key
    if path == "~":
        name = function.strip("<>")
        if name.startswith("method '") and "' of '" in name:
            owner = name.split("' of '", 1)[1].split("'", 1)[0]
            return f"builtin {owner}"
        return "builtin " + name.split(" ")[-1].split(".")[0]
    label = where(key).split(":", 1)[0]
    if label.startswith("federation/"):
        return label
    return label.split("/", 1)[0].removesuffix(".py")


def entries(path: str) -> tuple[list[Entry], float]:
    """Every function of the profile at ``path``; the total CPU seconds it counted."""
    stats = pstats.Stats(path)
    raw = stats.stats  # type: ignore[attr-defined]
    found = [(where(key), tottime, cumtime, calls)
             for key, (_, calls, tottime, cumtime, _) in raw.items()]
    return found, float(stats.total_tt)  # type: ignore[attr-defined]


def groups(path: str) -> list[tuple[str, float]]:
    """Own CPU seconds by :func:`group_of`, most first."""
    stats = pstats.Stats(path)
    totals: collections.defaultdict[str, float] = collections.defaultdict(float)
    for key, (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        totals[group_of(key)] += tottime
    return sorted(totals.items(), key=lambda item: -item[1])


def summary(path: str, per: int, top: int = 25, names: Sequence[str] = ()) -> str:
    """Markdown tables of the profile at ``path`` in ms per unit of work (``per`` units,
    templates): by module (own time), the top functions by own time, and the
    cumulative time of ``names`` (substrings of :func:`where` labels)."""
    found, total = entries(path)
    ms = 1000.0 / per
    lines = [f"profiled CPU: {total * ms:.2f} ms per template (under cProfile, which "
             "inflates it; the shares are what to read)", "",
             "| module (own time) | ms/template | share |", "|---|---|---|"]
    for name, seconds in groups(path)[:top]:
        lines.append(f"| {name} | {seconds * ms:.3f} | {seconds / total:.1%} |")
    lines += ["", "| function (own time) | calls/template | own ms/template | "
              "with callees ms/template | share |", "|---|---|---|---|---|"]
    for label, tottime, cumtime, calls in sorted(found, key=lambda e: -e[1])[:top]:
        lines.append(f"| `{label}` | {calls / per:.1f} | {tottime * ms:.3f} | "
                     f"{cumtime * ms:.3f} | {tottime / total:.1%} |")
    if names:
        lines += ["", "| stage (with callees) | calls/template | ms/template | share |",
                  "|---|---|---|---|"]
        for name in names:
            match = [e for e in found if name in e[0]]
            if not match:
                continue
            label, _, cumtime, calls = max(match, key=lambda e: e[2])
            lines.append(f"| `{label}` | {calls / per:.1f} | {cumtime * ms:.3f} | "
                         f"{cumtime / total:.1%} |")
    return "\n".join(lines)


def compare(before: str, after: str, per: int, names: Sequence[str] = (), top: int = 20
            ) -> str:
    """Two profiles of the same work (``per`` templates each) side by side: the total, the
    ``names`` stages (with callees; default :data:`STAGES`) and the modules by own time, in
    ms per template, with the ratio after/before."""
    old_found, old_total = entries(before)
    new_found, new_total = entries(after)
    ms = 1000.0 / per
    lines = ["| what | before ms/template | after ms/template | after/before |",
             "|---|---|---|---|",
             f"| whole profile | {old_total * ms:.2f} | {new_total * ms:.2f} | "
             f"{new_total / old_total:.2f} |"]
    for name in names or STAGES:
        old = max((e[2] for e in old_found if name in e[0]), default=0.0)
        new = max((e[2] for e in new_found if name in e[0]), default=0.0)
        if old or new:
            ratio = f"{new / old:.2f}" if old else "new"
            lines.append(f"| `{name}` (with callees) | {old * ms:.2f} | {new * ms:.2f} | "
                         f"{ratio} |")
    old_groups, new_groups = dict(groups(before)), dict(groups(after))
    for name, seconds in list(old_groups.items())[:top]:
        now = new_groups.get(name, 0.0)
        lines.append(f"| {name} (own) | {seconds * ms:.2f} | {now * ms:.2f} | "
                     f"{now / seconds:.2f} |")
    return "\n".join(lines)


STAGES = (
    "(_worker)", "propagation/reconciler.py:162(reconcile)", "(_record)", "kit/chain.py",
    "contexts/client.py:737(request)", "contexts/cache.py:259(run)", "(_emit)",
    "customized.py:48(interpret)", "propagation/context.py:119(list)",
    "multicluster.py:344(list)", "bindings.py:417(from_obj)", "cleanup.py:102(reconcile)",
    "runtime/metrics.py:87(collect)", "json/decoder.py:332(decode)",
)
"""Stages the comparison shows (substrings of :func:`where` labels)."""


if __name__ == "__main__":
    main()
