"""Renders per second of ``federation.cue`` on KubeVela's webservice and a trait.

Run: ``python bench/cue_render.py [MIRROR]`` (MIRROR: a bare git directory of
kubevela/kubevela, default the ``fetch`` tool's ``/work/.mirror/kubevela+kubevela/repo``).
Each template is parsed once (as a definition would be cached) and exported repeatedly
with a typical parameter; times are this process's CPU time (the machine may be shared).
The CUE-in-WebAssembly builds measured in docs/applications.md take about 0.5 s a render.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cue_oracle import CONTEXT, TRAIT_OUTPUT, template_of

from federation import cue

MIRROR = Path("/work/.mirror/kubevela+kubevela/repo")
CASES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("webservice", "component/webservice.cue", {
        "parameter": {"image": "nginx:1.25", "ports": [{"port": 80, "expose": True}],
                      "cpu": "0.5", "memory": "256Mi", "env": [{"name": "A", "value": "1"}],
                      "volumeMounts": {"emptyDir": [{"name": "tmp", "mountPath": "/tmp"}]}},
        "context": CONTEXT}, ["output", "outputs"]),
    ("sidecar (trait)", "trait/sidecar.cue", {
        "parameter": {"name": "log", "image": "busybox", "cmd": ["tail", "-f", "/log"]},
        "context": dict(CONTEXT, output=TRAIT_OUTPUT)}, ["patch"]),
    ("expose (trait)", "trait/expose.cue", {
        "parameter": {"port": [80, 443]},
        "context": dict(CONTEXT, output=TRAIT_OUTPUT)}, ["outputs"]),
]


def main() -> int:
    mirror = Path(sys.argv[1]) if len(sys.argv) > 1 else MIRROR
    for label, path, fill, fields in CASES:
        text = subprocess.run(
            ["git", "--git-dir", str(mirror), "show",
             f"HEAD:vela-templates/definitions/internal/{path}"],
            check=True, capture_output=True, text=True).stdout
        started = time.process_time()
        template = cue.parse(template_of(text), name=label)
        parsed = time.process_time() - started
        cue.export(template, fill, fields)  # warm up
        count, started = 0, time.process_time()
        while time.process_time() - started < 2.0:
            cue.export(template, fill, fields)
            count += 1
        elapsed = time.process_time() - started
        print(f"{label}: parse {parsed * 1000:.1f} ms; {count / elapsed:.0f} renders/s "
              f"({elapsed / count * 1000:.2f} ms of CPU each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
