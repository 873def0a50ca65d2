"""The dashboard's fleet page with ``--members`` (20) MemberClusters: first paint in Chromium.

Issue 28 asks for a first paint of the fleet page under 1 s with 20 members. The hub of a
local fleet gets MemberCluster objects up to ``--members`` (``bench-member-NN``, with a
resource summary and a taint, no API server behind them: they stay not ready, which
changes nothing for rendering), then ``fedctl dashboard`` serves it and Debian's headless
Chromium (driven by selenium, as tests/e2e/test_dashboard.py does) loads ``/``
``--loads`` (7) times. Each load is a new navigation; the browser's Performance API gives
its ``first-contentful-paint`` and ``domContentLoadedEventEnd`` (ms from the navigation's
start). Prints each, and the median and worst.

Run: ``.venv/bin/python bench/dashboard_paint.py`` (hold the e2e lock on a shared machine:
``flock /tmp/federation-e2e.lock ...``). It starts its own fleet in ``--state-dir`` and
removes it at the end (``--keep`` leaves it; a running fleet there is reused and left).
The MemberClusters it made are deleted at the end. The number is recorded in
docs/dashboard.md, "Speed".
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from federation.contexts import client as kube  # noqa: E402
from federation.contexts import kubeconfig  # noqa: E402
from federation.hub import api  # noqa: E402
from federation.local import fleet as local_fleet  # noqa: E402

FEDCTL = [sys.executable, "-m", "federation"]
PREFIX = "bench-member-"
PAINT = """
const done = arguments[arguments.length - 1];
const rows = document.querySelectorAll('table.fleet tbody tr').length;
const nav = performance.getEntriesByType('navigation')[0];
// the paint entry may come after the load event: wait for it (buffered: one already
// recorded is delivered at once)
new PerformanceObserver((list, observer) => {
  const paint = list.getEntriesByName('first-contentful-paint')[0];
  if (paint) {
    observer.disconnect();
    done([paint.startTime, nav ? nav.domContentLoadedEventEnd : -1, rows]);
  }
}).observe({type: 'paint', buffered: true});
"""

def member(index: int) -> dict[str, object]:
    return {"apiVersion": api.MEMBER_CLUSTERS.api_version, "kind": "MemberCluster",
            "metadata": {"name": f"{PREFIX}{index:02d}",
                         "labels": {"bench": "dashboard-paint"}},
            "spec": {"region": f"region-{index % 4}", "zone": f"zone-{index % 8}",
                     "provider": "bench",
                     "taints": [{"key": "bench", "value": str(index), "effect": "NoSchedule"}]}}


def status(index: int) -> dict[str, object]:
    return {"status": {"resourceSummary": {
        "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
        "allocated": {"cpu": f"{index % 16}", "memory": f"{index % 64}Gi",
                      "pods": f"{index * 3 % 110}"}}}}


async def ensure_members(context: kubeconfig.Context, total: int) -> list[str]:
    """MemberClusters up to ``total`` on the hub; the names made here (to delete)."""
    client = kube.ClusterClient(context)
    try:
        have = (await client.list(api.MEMBER_CLUSTERS)).get("items") or []
        made = []
        for index in range(1, max(total - len(have), 0) + 1):
            name = f"{PREFIX}{index:02d}"
            await client.create(api.MEMBER_CLUSTERS, member(index))
            await client.patch(api.MEMBER_CLUSTERS, name, status(index), subresource="status")
            made.append(name)
        return made
    finally:
        await client.close()


async def delete_members(context: kubeconfig.Context, names: list[str]) -> None:
    client = kube.ClusterClient(context)
    try:
        for name in names:
            await client.delete(api.MEMBER_CLUSTERS, name)
    finally:
        await client.close()


def browser(profile: Path) -> webdriver.Chrome:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        sys.exit("chromium and chromedriver not found: scripts/system-deps.sh installs them")
    options = Options()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", "--window-size=1360,900",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def measure(link: str, origin: str, loads: int, members: int) -> list[tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="dashboard-paint-") as profile:
        found = browser(Path(profile))
        try:
            found.get(link)  # trades the session link for the cookie (not measured)
            found.find_element(By.CSS_SELECTOR, "table.fleet")
            found.set_script_timeout(30)
            times = []
            for _ in range(loads):
                found.get(f"{origin}/")
                paint, loaded, rows = found.execute_async_script(PAINT)
                if rows < members:
                    raise SystemExit(f"the page showed {rows} members, not {members}: "
                                     "the dashboard had not read them yet")
                times.append((float(paint), float(loaded)))
                print(f"load: first-contentful-paint {paint:.0f} ms, "
                      f"DOMContentLoaded {loaded:.0f} ms, {rows} member rows")
            return times
        finally:
            found.quit()


def serve(kubeconfig_path: Path) -> tuple[subprocess.Popen[str], str, str]:
    process = subprocess.Popen([*FEDCTL, "dashboard", "--kubeconfig", str(kubeconfig_path),
                                "--context", "hub", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    match = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/\?token=\S+", first)
    if not match:
        process.kill()
        raise SystemExit(f"fedctl dashboard printed {first!r}")
    return process, first.split(": ", 1)[1].strip(), match.group(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--loads", type=int, default=7)
    parser.add_argument("--state-dir", default=str(ROOT / ".fleet-bench"))
    parser.add_argument("--kubeconfig", default=str(ROOT / "kubeconfigs" / "bench.local.yaml"))
    parser.add_argument("--keep", action="store_true", help="leave the fleet running")
    args = parser.parse_args()
    target = local_fleet.Fleet(Path(args.state_dir), Path(args.kubeconfig))
    reused = target.exists() and all(s.ready for s in target.status())
    if not reused:
        target.up(1, progress=lambda m: print(m, file=sys.stderr))
    made: list[str] = []
    context = kubeconfig.load(target.kubeconfig).context("hub")
    try:
        subprocess.run([*FEDCTL, "install", "--kubeconfig", str(target.kubeconfig),
                        "--hub-context", "hub", "--clusters", str(target.clusters_file)],
                       check=True, capture_output=True, timeout=300)
        made = asyncio.run(ensure_members(context, args.members))
        process, link, origin = serve(target.kubeconfig)
        try:
            times = measure(link, origin, args.loads, args.members)
        finally:
            process.terminate()
            process.wait(timeout=10)
        paints = sorted(t[0] for t in times)
        print(f"first-contentful-paint with {args.members} members over {args.loads} loads: "
              f"median {statistics.median(paints):.0f} ms, worst {paints[-1]:.0f} ms")
    finally:
        asyncio.run(delete_members(context, made))
        if not reused and not args.keep:
            target.down()


if __name__ == "__main__":
    main()
