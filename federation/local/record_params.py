"""The simulated workload's reload: append the parameters it was given to a JSON-lines file.

``python -m federation.local.record_params APPLIED FAIL_MARKER NAME=VALUE...`` is the exec
action of every reloader the local fleet's simulator starts (:mod:`federation.local.reloaders`).
Each successful call appends ``{"time": <UTC, microseconds>, "params": {NAME: VALUE}}`` to
APPLIED, which is what the e2e tests read. While the file FAIL_MARKER exists (the simulator
keeps it in step with the ``reloader.federation.io/simulate-fail`` annotation) the call
records nothing and exits 1, as a process that rejects a reload would. It imports nothing of
the project: it runs once per call and should start fast.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path


def record(applied: Path, fail_marker: Path, arguments: list[str]) -> int:
    if fail_marker.exists():
        print("simulated reload failure (reloader.federation.io/simulate-fail)",
              file=sys.stderr)
        return 1
    params: dict[str, str] = {}
    for argument in arguments:
        name, sep, value = argument.partition("=")
        if not sep:
            print(f"argument {name!r} is not NAME=VALUE", file=sys.stderr)
            return 2
        params[name] = value
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with applied.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"time": now, "params": params}, sort_keys=True) + "\n")
    print(f"applied {len(params)} parameter(s)")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: record_params APPLIED FAIL_MARKER NAME=VALUE...", file=sys.stderr)
        return 2
    return record(Path(argv[0]), Path(argv[1]), argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
