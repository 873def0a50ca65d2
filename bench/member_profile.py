"""Where a member's API server spends its CPU per copy: the raw window against ours.

The propagation bench's burst (``bench/propagation_bench.py``) writes the same copies to
the members twice: straight from the bench's own unthrottled client (raw), then through
the control plane (ours). This runs that burst on a fleet whose API servers serve
``/debug/pprof`` and, during each window, takes back-to-back CPU profiles
(``--slice`` seconds each) of one member's API server, counting the copies that member
created in exactly those slices (its own ``apiserver_request_total``). Go's
``go tool pprof`` merges each window's profiles; the tables show milliseconds of that API
server's CPU per copy created, in both windows and their difference, by function
(cumulative: the handler and storage frames say which request path pays) and by leaf
(flat: what the CPU was doing). Profiles are kept in ``--profile-dir``.

Run: ``.venv/bin/python bench/member_profile.py --templates 500`` (needs ``go``: Debian's
``golang-go``). Its other flags are the propagation bench's (``--data-plane paused``
compares the write paths alone).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PPROF_LINE = re.compile(  # flat flat% sum% cum cum% name; a zero is printed without a unit
    r"^\s*([\d.]+)([a-z]*)\s+[\d.]+%\s+[\d.]+%\s+([\d.]+)([a-z]*)\s+[\d.]+%\s+(.+?)\s*$")
UNITS_MS = {"": 0.0, "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0, "min": 60_000.0,
            "hrs": 3.6e6}


def load_propagation_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("propagation_bench",
                                                  ROOT / "bench" / "propagation_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


pb = load_propagation_bench()


@dataclasses.dataclass
class Window:
    """One window's profiles of the member and the copies it created while they ran."""

    label: str
    files: list[Path] = dataclasses.field(default_factory=list)
    creates: int = 0
    seconds: float = 0.0
    requests: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


REQUEST = re.compile(r'^apiserver_request_total\{(.*)\} ([\d.e+]+)$')


def requests_so_far(metrics: str) -> collections.Counter[str]:
    """Every request the API server answered so far (all verbs: reads are requests too),
    by ``VERB resource[/subresource] code``."""
    counts: collections.Counter[str] = collections.Counter()
    for line in metrics.splitlines():
        found = REQUEST.match(line)
        if not found:
            continue
        labels = dict(pb.LABEL.findall(found.group(1)))
        what = labels.get("resource", "?") + (f"/{labels['subresource']}"
                                              if labels.get("subresource") else "")
        counts[f"{labels.get('verb', '?')} {what} {labels.get('code', '?')}"] += \
            int(float(found.group(2)))
    return counts


def member_creates(counts: collections.Counter[str]) -> int:
    """Deployments the member's API server created (POST 201)."""
    return counts.get("POST deployments 201", 0)


class Profiler:
    """Back-to-back CPU profiles of one API server while a window runs."""

    def __init__(self, client: Any, directory: Path, slice_seconds: int) -> None:
        self.client = client
        self.directory = directory
        self.slice_seconds = slice_seconds
        self.windows: dict[str, Window] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self, label: str) -> None:
        window = self.windows.setdefault(label, Window(label))
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._slices(window, self._stop))

    async def close(self) -> None:
        """Stop after the slice in flight (its tail is the bench waiting, idle)."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _slices(self, window: Window, stop: asyncio.Event) -> None:
        while not stop.is_set():
            before = requests_so_far((await self.client.request_raw("/metrics")).decode())
            started = time.monotonic()
            data = await self.client.request_raw(
                "/debug/pprof/profile", params={"seconds": str(self.slice_seconds)})
            after = requests_so_far((await self.client.request_raw("/metrics")).decode())
            answered = after - before
            answered.subtract({"GET metrics 200": 1})  # the profiler's own reads
            window.requests.update(+answered)
            path = self.directory / f"{window.label}-{len(window.files):03d}.pb.gz"
            path.write_bytes(data)
            window.files.append(path)
            window.creates += member_creates(answered)
            window.seconds += time.monotonic() - started


class ProfiledBench(pb.Bench):  # type: ignore[misc,name-defined]
    """The propagation bench's burst with a profiler around both of its windows."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.profiler: Profiler | None = None

    async def fleet_up(self, members: int, fresh: bool) -> Any:
        if not self.fleet.exists():  # a fleet of our own, with /debug/pprof served
            await asyncio.to_thread(self.fleet.up, members, simulator=pb.SIMULATOR,
                                    progress=pb.log, profiling=True)
            self.owned_fleet = True
        elif not self.fleet.load().profiling:
            raise SystemExit(f"the fleet in {self.fleet.state_dir} does not serve "
                             "/debug/pprof: give another --state-dir (one this starts)")
        clients = await super().fleet_up(members, fresh)
        member = self.args.member or clients.members[0]
        self.profiler = Profiler(clients.member[member], Path(self.args.profile_dir),
                                 self.args.slice)
        return clients

    async def window_opened(self, label: str) -> None:
        assert self.profiler is not None
        await self.profiler.open(label)

    async def window_closed(self, label: str) -> None:
        assert self.profiler is not None
        await self.profiler.close()


def pprof_top(go: str, files: Sequence[Path], cumulative: bool) -> tuple[float, dict[str, float]]:
    """(total CPU ms, CPU ms by function) of the merged profiles: flat or cumulative."""
    argv = [go, "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0",
            "-edgefraction=0", "-unit=ms", *(["-cum"] if cumulative else []), *map(str, files)]
    output = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return parse_top(output, cumulative)


def parse_top(output: str, cumulative: bool) -> tuple[float, dict[str, float]]:
    """``go tool pprof -top``'s text: the total and each function's flat or cum time, ms."""
    total = 0.0
    found: dict[str, float] = {}
    for line in output.splitlines():
        header = re.search(r"of ([\d.]+)([a-z]*) total", line)
        if header:
            total = float(header.group(1)) * UNITS_MS[header.group(2)]
            continue
        row = PPROF_LINE.match(line)
        if row:
            flat = float(row.group(1)) * UNITS_MS[row.group(2)]
            cum = float(row.group(3)) * UNITS_MS[row.group(4)]
            found[row.group(5)] = cum if cumulative else flat
    return total, found


def compare(go: str, raw: Window, ours: Window, cumulative: bool, top: int) -> str:
    """The functions whose CPU per copy grew most from the raw window to ours."""
    raw_total, raw_by = pprof_top(go, raw.files, cumulative)
    ours_total, ours_by = pprof_top(go, ours.files, cumulative)
    per_raw, per_ours = 1 / max(raw.creates, 1), 1 / max(ours.creates, 1)
    rows = sorted(set(raw_by) | set(ours_by),
                  key=lambda f: ours_by.get(f, 0) * per_ours - raw_by.get(f, 0) * per_raw,
                  reverse=True)[:top]
    kind = "cumulative" if cumulative else "flat (leaf)"
    lines = [f"{kind}: ms of the member API server's CPU per copy it created",
             f"{'raw':>8} {'ours':>8} {'ours-raw':>9}  function",
             f"{raw_total * per_raw:8.3f} {ours_total * per_ours:8.3f} "
             f"{ours_total * per_ours - raw_total * per_raw:9.3f}  (all samples)"]
    for name in rows:
        r, o = raw_by.get(name, 0.0) * per_raw, ours_by.get(name, 0.0) * per_ours
        lines.append(f"{r:8.3f} {o:8.3f} {o - r:9.3f}  {name[:110]}")
    return "\n".join(lines)


def save_windows(directory: Path, windows: dict[str, Window]) -> None:
    """What the analysis needs, beside the profiles (``--analyse`` reads it again)."""
    (directory / "windows.json").write_text(json.dumps(
        {label: {"files": [p.name for p in w.files], "creates": w.creates,
                 "seconds": w.seconds, "requests": dict(w.requests)}
         for label, w in windows.items()}, indent=1))


def load_windows(directory: Path) -> dict[str, Window]:
    data = json.loads((directory / "windows.json").read_text())
    return {label: Window(label, [directory / name for name in w["files"]],
                          int(w["creates"]), float(w["seconds"]),
                          collections.Counter(w.get("requests") or {}))
            for label, w in data.items()}


def report(go: str, windows: dict[str, Window], top: int) -> None:
    if "raw" not in windows or "ours" not in windows:
        raise SystemExit("a window was not profiled (see the bench's log above)")
    raw, ours = windows["raw"], windows["ours"]
    for window in (raw, ours):
        print(f"{window.label}: {len(window.files)} profiles of {window.seconds:.1f} s, "
              f"{window.creates} copies created in them; requests per copy: "
              f"{sum(window.requests.values()) / max(window.creates, 1):.2f} ("
              + ", ".join(f"{what} {n / max(window.creates, 1):.2f}"
                          for what, n in window.requests.most_common(8)) + ")")
    for cumulative in (True, False):
        print()
        print(compare(go, raw, ours, cumulative, top))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--profile-dir", default=str(ROOT / ".bench-profiles"))
    own.add_argument("--member", default="", help="the member profiled (the first by default)")
    own.add_argument("--slice", type=int, default=2, help="seconds per profile")
    own.add_argument("--top", type=int, default=25, help="rows per table")
    own.add_argument("--analyse", action="store_true",
                     help="only print the tables of the profiles already in --profile-dir")
    known, rest = own.parse_known_args(argv)
    args: argparse.Namespace = pb.parse_args(["--scenarios", "burst", "--state-dir",
                          str(ROOT / ".fleet-profile"), "--kubeconfig",
                          str(ROOT / "kubeconfigs" / "profile.local.yaml"), *rest])
    for key, value in vars(known).items():
        setattr(args, key, value)
    if args.slice < 1:
        own.error("--slice must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    go = shutil.which("go")
    if go is None:
        raise SystemExit("go is not on PATH (Debian: apt-get install golang-go): "
                         "`go tool pprof` reads the profiles")
    directory = Path(args.profile_dir)
    if args.analyse:
        report(go, load_windows(directory), args.top)
        return
    directory.mkdir(parents=True, exist_ok=True)
    bench = ProfiledBench(args)
    asyncio.run(bench.run())
    print(pb.table(bench.rows))
    assert bench.profiler is not None
    save_windows(directory, bench.profiler.windows)
    print()
    report(go, bench.profiler.windows, args.top)


if __name__ == "__main__":
    main()
