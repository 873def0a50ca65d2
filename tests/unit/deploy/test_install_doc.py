"""docs/install.md says what the code does: its permissions table is the rules' own, and
its uninstall and pull-agent claims hold."""

from __future__ import annotations

import re
from pathlib import Path

from federation.deploy import layout, manifests
from federation.deploy.manifests import Options
from federation.rbac import roles

DOC = Path(__file__).resolve().parents[3] / "docs" / "install.md"
BLOCK = re.compile(r"<!-- permissions: begin \(generated\) -->\n(.*?)<!-- permissions: end -->",
                   re.S)


def test_the_permissions_table_is_generated_from_the_rules() -> None:
    """Regenerate with `python -m federation.deploy --permissions`."""
    found = BLOCK.search(DOC.read_text())
    assert found is not None, "docs/install.md lost its permissions markers"
    assert found.group(1) == layout.permissions_table(Options())


def test_the_table_lists_every_rule_of_every_role_granted() -> None:
    """Every rule of the hub, member and agent roles has its row, with its reason."""
    text = layout.permissions_table(Options())
    sections = layout.permission_sections(Options())
    rules = [r for ms in sections.values() for m in ms for r in m.rules]
    assert len(rules) == len(text.splitlines()) - 2
    for rule in rules:
        assert f"| {', '.join(rule.verbs)} | {rule.why} |" in text
    assert [m.name for m in sections["member"] if m.rules] == [roles.MEMBER_ROLE]
    granted = {o["metadata"]["name"] for o in manifests.agent_objects(Options())
               if o["kind"] in ("Role", "ClusterRole")}
    listed = {m.name for ms in sections.values() for m in ms if m.kind in ("Role",
                                                                          "ClusterRole")}
    assert granted <= listed  # the agent's roles are in the table too


def test_the_agents_record_of_applied_work_goes_with_its_pod() -> None:
    """Uninstalling: deleting the agent's Deployment forgets what it applied (the record
    is in an emptyDir, not a volume that outlives the pod)."""
    spec = manifests.agent_deployment(Options())["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes["state"] and set(volumes["state"]) == {"name", "emptyDir"}
    args = spec["containers"][0]["args"]
    assert f"--state-dir={manifests.AGENT_STATE_DIR}" in args
    assert manifests.AGENT_STATE_DIR.startswith(manifests.AGENT_STATE_VOLUME + "/")
