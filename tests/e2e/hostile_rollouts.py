"""Issue 20, finding 1, as a tenant would do it on the hub: governed ConfigMaps whose new
content froze the rollout controller (an ini line configparser is quadratic on, a YAML
alias bomb, json/yaml/toml nested deeper than Python's stack, a legitimate 900 KiB YAML
file, and a ConfigConstraint ``pattern`` that backtracks for minutes on a 29-character
value), each with its ConfigConstraint, a Duplicated PropagationPolicy and a
ReconfigurePolicy.

:func:`apply_hostile_rollouts` applies a benign first version, waits until every member
holds its copy (a rollout diffs the member copy against the hub: without copies nothing is
parsed), then replaces each ConfigMap's content with the hostile one and returns what each
policy should end as. Reusable by any e2e test that needs a tenant attacking the control
plane while it checks something else (``/healthz``, another namespace's propagation).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from functools import partial
from typing import Any

from tests.conftest import TestFleet, kubectl_binary
from tests.e2e.helpers import apply, get_or_none, wait_for

CONFIG_API = "config.federation.io/v1alpha1"
RCP = "reconfigurepolicies.config.federation.io"


@dataclasses.dataclass(frozen=True)
class Hostile:
    name: str
    format: str
    benign: str
    content: str
    reason: str
    """The reason class the ``InvalidFile`` condition names (``None``: accepted)."""
    pattern: str | None = None


def alias_bomb(levels: int = 40) -> str:
    lines = ["l0: &l0 {a: 1, b: 2}"]
    lines += [f"l{i}: &l{i} {{a: *l{i - 1}, b: *l{i - 1}}}" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def nine_hundred_kib_yaml() -> str:
    return "".join(f"section{i}:\n  value: {'v' * 30}{i}\n" for i in range(16_000))


CASES = (
    Hostile("ini-line", "ini", "[mysqld]\nname = a\n",
            "[mysqld]\nk" + " " * 45_000 + "v\n", "line too long"),
    Hostile("yaml-bomb", "yaml", "a: 1\n", alias_bomb(), "too many values"),
    Hostile("json-deep", "json", '{"a": 1}', '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "nested too deep"),
    Hostile("yaml-deep", "yaml", "a: 1\n", "a: " + "[" * 5_000 + "]" * 5_000 + "\n",
            "nested too deep"),
    Hostile("toml-deep", "toml", "a = 1\n", "a = " + "[" * 100_000 + "]" * 100_000 + "\n",
            "nested too deep"),
    # Legitimate: 900 KiB in every member, one value changed (parsed twice, off the loop).
    Hostile("yaml-900k", "yaml", nine_hundred_kib_yaml(),
            nine_hundred_kib_yaml().replace(f"value: {'v' * 30}7\n", "value: changed\n"), ""),
    Hostile("pattern", "ini", "[mysqld]\nname = a\n", "[mysqld]\nname = " + "a" * 29 + "!\n",
            "timed out", pattern="([a-z0-9]+)*"),
)


def constraint_name(ns: str, case: Hostile) -> str:
    return f"hostile-{ns}-{case.name}"


def manifests(ns: str, case: Hostile, content: str) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"fileFormatConfig": {"format": case.format},
                            "dynamicParameters": ["*"]}
    if case.pattern is not None:
        spec["parametersSchema"] = {"mysqld.name": {"type": "string", "pattern": case.pattern}}
    name = f"h-{case.name}"
    return [
        {"apiVersion": CONFIG_API, "kind": "ConfigConstraint",
         "metadata": {"name": constraint_name(ns, case)}, "spec": spec},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
         "data": {"app.conf": content}},
        {"apiVersion": CONFIG_API, "kind": "ReconfigurePolicy",
         "metadata": {"name": name, "namespace": ns},
         "spec": {"configRef": {"kind": "ConfigMap", "name": name},
                  "files": [{"key": "app.conf", "constraintRef": constraint_name(ns, case)}],
                  "workloads": [{"kind": "Deployment", "name": name}]}},
    ]


def propagation(ns: str) -> dict[str, Any]:
    return {"apiVersion": "policy.federation.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "hostile", "namespace": ns},
            "spec": {"resourceSelectors": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": f"h-{case.name}"}
                for case in CASES],
                "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}


def write(fleet: TestFleet, verb: str, manifest: dict[str, Any]) -> None:
    """``kubectl create`` or ``replace`` on the hub: a 900 KiB ConfigMap does not fit
    ``apply``'s last-applied annotation (256 KiB)."""
    result = subprocess.run(
        [kubectl_binary(), "--kubeconfig", str(fleet.kubeconfig), "--context", "hub",
         verb, "-f", "-"], input=json.dumps(manifest), text=True, capture_output=True,
        timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"kubectl {verb} failed: {result.stderr.strip()[:500]}")


def copied_everywhere(fleet: TestFleet, ns: str) -> bool:
    return all(get_or_none(fleet, member, "configmap", f"h-{case.name}", "-n", ns)
               for member in fleet.member_names for case in CASES)


def apply_hostile_rollouts(fleet: TestFleet, ns: str, timeout: float = 120) -> list[Hostile]:
    """Apply every case of :data:`CASES` to namespace ``ns`` of the hub: benign first,
    copied to every member, then the hostile contents. Returns the cases (policy and
    ConfigMap ``h-<name>``, constraint :func:`constraint_name`)."""
    for case in CASES:
        constraint, config, policy = manifests(ns, case, case.benign)
        apply(fleet, "hub", constraint, policy)
        write(fleet, "create", config)
    apply(fleet, "hub", propagation(ns))
    wait_for(partial(copied_everywhere, fleet, ns), timeout=timeout,
             what="the hostile ConfigMaps' first versions in every member")
    for case in CASES:
        write(fleet, "replace", manifests(ns, case, case.content)[1])
    return list(CASES)


def verdict(fleet: TestFleet, ns: str, case: Hostile) -> dict[str, Any] | None:
    """The policy's Accepted condition once it judged the hostile version (None before)."""
    doc = get_or_none(fleet, "hub", RCP, f"h-{case.name}", "-n", ns) or {}
    status = doc.get("status") or {}
    if status.get("phase") not in ("Refused", "Rolling", "Complete", "Failed"):
        return None
    accepted: dict[str, Any] = next((c for c in status.get("conditions") or []
                                     if c.get("type") == "Accepted"), {})
    judged = accepted.get("status") == "False" or status.get("action") not in (None,
                                                                               "unchanged")
    return accepted if judged else None


def delete_hostile_rollouts(fleet: TestFleet, ns: str) -> None:
    for case in CASES:
        fleet.kubectl("hub", "delete", f"configconstraints.config.federation.io/"
                      f"{constraint_name(ns, case)}", "--wait=false", check=False)
