"""The generated RBAC: exactly the rights the control plane's calls need, never a wildcard.

``allows`` below is a small model of Kubernetes' RBAC rule matching (verbs, groups,
resources with subresources, resourceNames, nonResourceURLs with a trailing ``*``);
the e2e suite checks the same manifests against a real API server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import yaml

from federation.contexts import client as kube
from federation.controllers import health, install
from federation.hub import api, deny, status
from federation.local import pki
from federation.rbac import never, roles

Rules = Sequence[dict[str, Any]]


def allows(rules: Rules, verb: str, group: str, resource: str, name: str | None = None
           ) -> bool:
    for rule in rules:
        if "nonResourceURLs" in rule:
            continue
        if (verb in rule["verbs"] and group in rule["apiGroups"]
                and resource in rule["resources"]
                and (not rule.get("resourceNames") or name in rule["resourceNames"])):
            return True
    return False


def allows_url(rules: Rules, path: str) -> bool:
    for rule in rules:
        for url in rule.get("nonResourceURLs", ()):
            if url == path or (url.endswith("*") and path.startswith(url[:-1])):
                return "get" in rule["verbs"]
    return False


def by_name(manifests: Sequence[roles.Manifest], kind: str, name: str) -> dict[str, Any]:
    found = [m.body for m in manifests if m.kind == kind and m.name == name]
    assert len(found) == 1, f"{kind} {name}"
    return found[0]


HUB = roles.hub(roles.Settings())
MEMBER = roles.member(roles.Settings())
HUB_RULES = by_name(HUB, "ClusterRole", roles.HUB_ROLE)["rules"]
OWN_RULES = by_name(HUB, "Role", roles.NAMESPACE_ROLE)["rules"]
LEASE_RULES = by_name(HUB, "Role", roles.LEADER_ROLE)["rules"]
SECRET_RULES = by_name(HUB, "ClusterRole", roles.SECRETS_ROLE)["rules"]
MEMBER_RULES = by_name(MEMBER, "ClusterRole", roles.MEMBER_ROLE)["rules"]
ALL_RULES = [*HUB_RULES, *OWN_RULES, *LEASE_RULES, *SECRET_RULES, *MEMBER_RULES]


# -- never too much ---------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [(), ("widgets.example.com", "pods", "foos.a.b.c")])
def test_no_rule_has_a_wildcard_or_an_escalation_verb(extra: tuple[str, ...]) -> None:
    """No `*` in verbs, groups, resources or names; no escalate, bind or impersonate; on
    the RBAC group only a read of RoleBindings (where Secrets are granted), whatever kinds
    are propagated."""
    settings = roles.Settings(kinds=roles.parse_kinds(extra), secret_namespaces=("shop",))
    for manifest in [*roles.hub(settings), *roles.member(settings)]:
        for rule in manifest.body.get("rules", []):
            values = [*rule["verbs"], *rule.get("apiGroups", ()), *rule.get("resources", ()),
                      *rule.get("resourceNames", ())]
            assert not any("*" in v for v in values), rule
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(
                rule["verbs"]), rule
            if roles.RBAC_GROUP in rule.get("apiGroups", ()):
                assert rule == {"apiGroups": [roles.RBAC_GROUP], "resources": ["rolebindings"],
                                "verbs": ["list", "watch"]}, rule


@pytest.mark.parametrize("text", ["roles.rbac.authorization.k8s.io",
                                  "clusterrolebindings.rbac.authorization.k8s.io",
                                  "rolebindings.rbac.authorization.k8s.io"])
def test_rbac_kinds_are_refused(text: str) -> None:
    """Propagating Roles or bindings would let a policy author grant the control plane's
    member rights to anyone: refused with the option named."""
    with pytest.raises(roles.RBACError, match=r"^--propagate-kinds: .*never propagated: RBAC"):
        roles.parse_kinds([text])


@pytest.mark.parametrize(("text", "why"), [
    ("validatingwebhookconfigurations.admissionregistration.k8s.io", "admission webhooks"),
    ("mutatingwebhookconfigurations.admissionregistration.k8s.io", "admission webhooks"),
    ("validatingadmissionpolicies.admissionregistration.k8s.io", "admission webhooks"),
    ("certificatesigningrequests.certificates.k8s.io", "cluster plumbing"),
    ("nodes", "cluster plumbing"), ("apiservices.apiregistration.k8s.io", "cluster plumbing"),
    ("podsecuritypolicies.policy", "PodSecurityPolicy"),
    ("tokenreviews.authentication.k8s.io", "review"),
    ("subjectaccessreviews.authorization.k8s.io", "review"),
    ("selfsubjectrulesreviews.authorization.k8s.io", "review"),
    ("applications.core.oam.dev", "KubeVela"), ("policies.core.oam.dev", "KubeVela"),
    ("resourcetrackers.core.oam.dev", "KubeVela"),
    ("events", "records"), ("leases.coordination.k8s.io", "records"),
    ("propagationpolicies.policy.federation.io", "our own API"),
    ("memberclusters.cluster.federation.io", "our own API"),
])
def test_kinds_never_propagated_are_refused_by_name(text: str, why: str) -> None:
    """The attack of finding 15: `fedctl rbac --propagate-kinds` granted webhook
    configurations, CSRs, nodes, PodSecurityPolicies, reviews and core.oam.dev kinds. Each is
    now one line naming the option, the kind and why."""
    with pytest.raises(roles.RBACError) as error:
        roles.parse_kinds([f"configmaps,{text}"])
    message = str(error.value)
    assert message.startswith(f"--propagate-kinds: {text!r} is never propagated: ")
    assert why in message and "\n" not in message


@pytest.mark.parametrize("text", ["poddisruptionbudgets.policy", "priorityclasses"
                                  ".scheduling.k8s.io", "widgets.example.com", "secrets"])
def test_ordinary_kinds_of_the_same_groups_are_granted(text: str) -> None:
    """Only the listed kinds: a PodDisruptionBudget shares PodSecurityPolicy's group."""
    assert roles.parse_kind(text) in roles.parse_kinds([text])


def test_the_never_list_is_the_deny_lists_whole_kinds() -> None:
    """One list: every kind the generator refuses is denied whole by the default deny
    list (fedctl run), and every whole-kind default rule is refused by the generator."""
    denied = deny.DenyList()
    for entry in never.NEVER:
        assert denied.kind_rule(entry.group, "AnyKind" if entry.kind == "*" else entry.kind)
    whole = [r for r in deny.DEFAULT_RULES if r.whole_kind]
    assert {(r.group, r.kind) for r in whole} == {(n.group, n.kind) for n in never.NEVER}


@pytest.mark.parametrize("text", ["*", "*.apps", "deployments.*", "Deployment",
                                  "deployments/status", "deploy ments", ".apps", "x..y", "a.-b"])
def test_malformed_or_wildcard_kinds_are_refused_in_one_line(text: str) -> None:
    """Wildcards, Kind names, subresources and bad groups: one line naming the option."""
    with pytest.raises(roles.RBACError) as error:
        roles.parse_kinds([text])
    assert str(error.value).startswith("--propagate-kinds: ")
    assert "\n" not in str(error.value)


def test_no_kinds_at_all_is_refused() -> None:
    with pytest.raises(roles.RBACError, match="no kind"):
        roles.parse_kinds([], defaults=False)


def test_hub_templates_are_read_and_updated_never_created_or_deleted() -> None:
    """On the hub the control plane changes templates only by PUT (finalizer, annotations)
    and a status patch for workloads; it creates or deletes none. Secrets are not in the
    ClusterRole at all (finding 4: it granted them cluster-wide): their own role does it,
    per namespace, with create and delete for the config store's Secrets (never patch)."""
    for kind in roles.DEFAULT_KINDS:
        wanted = kind != roles.SECRETS_KIND
        for verb in ("get", "list", "watch", "update"):
            assert allows(HUB_RULES, verb, kind.group, kind.resource) == wanted, (verb, kind)
        for verb in ("create", "delete", "patch"):
            assert not allows(HUB_RULES, verb, kind.group, kind.resource), (verb, kind)
    for verb in ("get", "list", "watch", "create", "update", "delete"):
        assert allows(SECRET_RULES, verb, "", "secrets")
    for verb in ("patch", "deletecollection"):
        assert not allows(SECRET_RULES, verb, "", "secrets")
    assert allows(HUB_RULES, "patch", "apps", "deployments/status")
    assert not allows(HUB_RULES, "patch", "", "configmaps/status")
    assert not allows(HUB_RULES, "get", "", "pods")


def test_secrets_of_joined_clusters_are_readable_only_in_our_namespace() -> None:
    """Joined kubeconfigs and the CA keys: get only, and only in federation-system (a
    Role there): never listed, watched (so never cached) or written."""
    own = by_name(HUB, "Role", roles.NAMESPACE_ROLE)
    assert own["metadata"]["namespace"] == "federation-system"
    assert allows(OWN_RULES, "get", "", "secrets")
    for verb in ("list", "watch", "create", "update", "patch", "delete"):
        assert not allows(OWN_RULES, verb, "", "secrets")


def test_the_secrets_role_is_bound_only_in_the_named_namespaces() -> None:
    """ClusterRole federation:control-plane:secrets is never bound cluster-wide: one
    RoleBinding per --secret-namespaces entry, none by default."""
    settings = roles.Settings(secret_namespaces=("shop", "team-b"))
    hub = roles.hub(settings)
    by_name(hub, "ClusterRole", roles.SECRETS_ROLE)
    bound = [m for m in hub if m.body.get("roleRef", {}).get("name") == roles.SECRETS_ROLE]
    assert [(m.kind, m.body["metadata"]["namespace"]) for m in bound] == \
        [("RoleBinding", "shop"), ("RoleBinding", "team-b")]
    assert all(m.name == roles.SECRETS_ROLE for m in bound)
    assert not [m for m in HUB if m.body.get("roleRef", {}).get("name") == roles.SECRETS_ROLE]
    assert allows(HUB_RULES, "list", roles.RBAC_GROUP, "rolebindings")
    assert not allows(HUB_RULES, "get", "", "secrets")


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease",
                                       "kube-anything", "federation-system"])
def test_system_namespaces_and_ours_are_never_granted(namespace: str) -> None:
    """--secret-namespaces refuses kube-* and the control plane's own namespace, by name."""
    with pytest.raises(roles.RBACError) as error:
        roles.parse_secret_namespaces([f"shop,{namespace}"])
    assert str(error.value).startswith(f"--secret-namespaces: {namespace} is ")
    with pytest.raises(roles.RBACError):
        roles.Settings(secret_namespaces=(namespace,))


@pytest.mark.parametrize("text", ["Shop", "../x", "a b", "x" * 64])
def test_malformed_secret_namespaces_are_refused(text: str) -> None:
    with pytest.raises(roles.RBACError, match="is not a namespace name"):
        roles.parse_secret_namespaces([text])


def test_secret_namespaces_need_secrets_to_be_propagated() -> None:
    kinds = roles.parse_kinds(["configmaps"], defaults=False)
    with pytest.raises(roles.RBACError, match="secrets is not a propagated kind"):
        roles.Settings(kinds=kinds, secret_namespaces=("shop",))
    assert not [m for m in roles.hub(roles.Settings(kinds=kinds))
                if m.name == roles.SECRETS_ROLE]


def test_only_our_own_lease_can_be_renewed() -> None:
    """Leases: create (cannot be limited by name), get/update of the configured one only."""
    settings = roles.Settings(leader_election_namespace="ops", leader_election_id="mine")
    lease_role = by_name(roles.hub(settings), "Role", roles.LEADER_ROLE)
    assert lease_role["metadata"]["namespace"] == "ops"
    rules = lease_role["rules"]
    assert allows(rules, "create", "coordination.k8s.io", "leases")
    assert allows(rules, "update", "coordination.k8s.io", "leases", "mine")
    assert not allows(rules, "update", "coordination.k8s.io", "leases", "kube-scheduler")
    assert not allows(rules, "delete", "coordination.k8s.io", "leases", "mine")


def test_crds_are_patched_on_the_hub_only_by_name_and_never_created() -> None:
    for name in roles.CRD_NAMES:
        assert allows(HUB_RULES, "patch", "apiextensions.k8s.io", "customresourcedefinitions",
                      name)
    assert not allows(HUB_RULES, "patch", "apiextensions.k8s.io", "customresourcedefinitions",
                      "widgets.example.com")
    assert not allows(HUB_RULES, "create", "apiextensions.k8s.io", "customresourcedefinitions")


def test_members_allow_copies_and_reads_but_not_node_or_crd_changes() -> None:
    for kind in roles.DEFAULT_KINDS:
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
            assert allows(MEMBER_RULES, verb, kind.group, kind.resource), (verb, kind)
    assert not allows(MEMBER_RULES, "delete", "", "nodes")
    assert not allows(MEMBER_RULES, "update", "apiextensions.k8s.io",
                      "customresourcedefinitions")
    assert not allows(MEMBER_RULES, "create", "", "pods")
    assert not allows(MEMBER_RULES, "create", "apps", "replicasets")


# -- enough: every call the control plane makes -----------------------------------------------


def test_hub_rules_cover_every_call_on_our_api() -> None:
    """Policies read and their status patched; MemberClusters read, replaced (taints) and
    their status patched; bindings fully managed; Events created (controllers/*)."""
    for resource in (api.PROPAGATION_POLICIES, api.CLUSTER_PROPAGATION_POLICIES,
                     api.OVERRIDE_POLICIES, api.CLUSTER_OVERRIDE_POLICIES):
        for verb in ("get", "list", "watch"):
            assert allows(HUB_RULES, verb, resource.group, resource.plural)
        assert allows(HUB_RULES, "patch", resource.group, f"{resource.plural}/status")
    clusters = api.MEMBER_CLUSTERS
    for verb in ("get", "list", "watch", "update"):
        assert allows(HUB_RULES, verb, clusters.group, clusters.plural)
    assert allows(HUB_RULES, "patch", clusters.group, "memberclusters/status")
    for resource in (api.RESOURCE_BINDINGS, api.CLUSTER_RESOURCE_BINDINGS):
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
            assert allows(HUB_RULES, verb, resource.group, resource.plural)
        # One record, one request: bindings have no status subresource.
        assert not allows(HUB_RULES, "patch", resource.group, f"{resource.plural}/status")
    assert allows(HUB_RULES, "create", api.EVENTS.group, api.EVENTS.plural)
    for verb in ("get", "list", "watch"):
        assert allows(HUB_RULES, verb, api.CRDS.group, api.CRDS.plural)
        assert allows(HUB_RULES, verb, "", "namespaces")
    assert allows(HUB_RULES, "create", "authentication.k8s.io", "tokenreviews")
    assert allows(HUB_RULES, "create", "authorization.k8s.io", "subjectaccessreviews")


def test_member_rules_cover_namespaces_crds_and_capacity() -> None:
    """Namespaces and CRDs created before copies; nodes and workloads read for capacity
    (health.WORKLOADS)."""
    assert allows(MEMBER_RULES, "create", "", "namespaces")
    assert allows(MEMBER_RULES, "create", api.CRDS.group, api.CRDS.plural)
    for resource in (*health.WORKLOADS, kube.NODES):
        for verb in ("list", "watch"):
            assert allows(MEMBER_RULES, verb, resource.group, resource.plural)


@pytest.mark.parametrize("rules", [HUB_RULES, MEMBER_RULES])
@pytest.mark.parametrize("path", ["/readyz", "/healthz", "/api", "/apis",
                                  "/apis/apps/v1", "/api/v1"])
def test_probes_and_discovery_are_allowed(rules: Rules, path: str) -> None:
    assert allows_url(rules, path)


def test_an_extra_kind_is_granted_on_both_sides() -> None:
    """`--propagate-kinds widgets.example.com` (the e2e Widget) adds hub read/update and
    member management of that resource, in its own group only."""
    settings = roles.Settings(kinds=roles.parse_kinds(["widgets.example.com"]))
    hub_rules = by_name(roles.hub(settings), "ClusterRole", roles.HUB_ROLE)["rules"]
    member_rules = by_name(roles.member(settings), "ClusterRole", roles.MEMBER_ROLE)["rules"]
    assert allows(hub_rules, "update", "example.com", "widgets")
    assert allows(member_rules, "delete", "example.com", "widgets")
    assert not allows(member_rules, "delete", "example.com", "deployments")
    assert not allows(member_rules, "delete", "apps", "widgets")


def test_an_extra_kind_may_get_its_aggregated_status_and_no_default_kind_more() -> None:
    """A customization's AggregateStatus is written to the hub template's status: patch of
    ``widgets/status`` for a kind given beyond the defaults; the default kinds keep only
    the workloads' status."""
    settings = roles.Settings(kinds=roles.parse_kinds(["widgets.example.com"]))
    hub_rules = by_name(roles.hub(settings), "ClusterRole", roles.HUB_ROLE)["rules"]
    assert allows(hub_rules, "patch", "example.com", "widgets/status")
    assert not allows(hub_rules, "patch", "", "configmaps/status")
    assert not allows(hub_rules, "patch", "", "services/status")
    assert allows(hub_rules, "patch", "apps", "deployments/status")


# -- consistent with the rest of the code ------------------------------------------------------


def test_crd_names_are_those_of_the_hub_api() -> None:
    names = tuple(doc["metadata"]["name"] for doc in install.crd_documents())
    assert sorted(names) == sorted(roles.CRD_NAMES)


def test_status_kinds_are_the_workloads_whose_status_is_summed() -> None:
    assert {k.resource for k in roles.STATUS_KINDS} == {
        f"{kind.lower()}s" for kind in status.WORKLOAD_KINDS}


def test_bindings_name_the_fleet_user_and_the_service_account() -> None:
    for manifest in [*HUB, *MEMBER]:
        if manifest.kind.endswith("Binding"):
            assert manifest.body["subjects"] == [
                {"kind": "User", "apiGroup": roles.RBAC_GROUP, "name": pki.CONTROL_PLANE_USER},
                {"kind": "ServiceAccount", "name": "federation-control-plane",
                 "namespace": "federation-system"}]
            assert manifest.body["roleRef"]["name"] == manifest.name


def test_every_rule_says_why() -> None:
    for rule in [r for m in [*HUB, *MEMBER] for r in m.rules]:
        assert len(rule.why) > 20


# -- output -----------------------------------------------------------------------------------


def test_rendered_yaml_is_the_manifests_with_reasons_as_comments() -> None:
    """`fedctl rbac` output loads back to exactly the applied objects; reasons are comments."""
    manifests = [*roles.hub(roles.Settings()), *roles.member(roles.Settings())]
    text = roles.render(manifests, "heading line")
    assert list(yaml.safe_load_all(text)) == [m.body for m in manifests]
    assert text.startswith("# heading line\n")
    assert "# Kubeconfigs of joined clusters" in text


def test_table_has_a_row_per_rule() -> None:
    text = roles.table({"hub": HUB, "member": MEMBER})
    rows = text.strip().splitlines()[2:]
    assert len(rows) == sum(len(m.rules) for m in [*HUB, *MEMBER])
    assert all(row.count("|") >= 6 for row in rows)


def test_printed_manifests_create_the_namespace_they_need() -> None:
    documents = roles.namespace_manifests(HUB)
    assert [d.body["metadata"]["name"] for d in documents] == ["federation-system"]


@pytest.mark.parametrize("args", [
    ["rbac", "--propagate-kinds", "validatingwebhookconfigurations.admissionregistration.k8s.io"],
    ["rbac", "--propagate-kinds", "applications.core.oam.dev"],
    ["rbac", "--secret-namespaces", "kube-system"],
    ["install", "--kubeconfig", "/nonexistent", "--propagate-kinds", "nodes"],
    ["install", "--kubeconfig", "/nonexistent", "--secret-namespaces", "federation-system"],
])
def test_the_commands_refuse_in_one_line_before_anything_is_read(args: list[str]) -> None:
    """`fedctl rbac` and `fedctl install`: exit 1, one `error:` line, nothing printed or
    applied (install refuses before it even reads the kubeconfig)."""
    from click.testing import CliRunner

    from federation.cli import cli

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: --") and result.stderr.count("\n") == 1


def test_printed_rbac_names_where_secrets_are_readable() -> None:
    from click.testing import CliRunner

    from federation.cli import cli

    result = CliRunner().invoke(cli, ["rbac", "--only", "hub", "--secret-namespaces", "shop"])
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.stdout))
    bindings = [d for d in documents if d["kind"] == "RoleBinding"
                and d["roleRef"]["name"] == roles.SECRETS_ROLE]
    assert [b["metadata"]["namespace"] for b in bindings] == ["shop"]
    assert "# Secrets readable in: shop." in result.stdout
