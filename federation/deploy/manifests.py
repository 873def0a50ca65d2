"""The control plane's and the pull agent's Kubernetes objects, as plain dicts.

Everything here is a pure function of :class:`Options` (and, for the CRDs, the shipped CRD
documents): no cluster, no clock, no file. The same functions feed ``config/`` (``make
manifests``), ``fedctl install --control-plane`` and its ``--print``, so what an operator
applies with kustomize and what ``fedctl`` applies are one thing.

The numbers in the Deployment are chosen, not guessed; each says where it comes from:

- **Leader election.** Two replicas; the standby keeps its caches warm and takes over when
  it has not seen the Lease renewed for ``lease_duration`` (15 s). The flags are spelled
  out, although they are ``fedctl run``'s defaults, so an operator sees them next to the
  termination grace period they bound.
- **Termination grace.** On SIGTERM the manager stops within
  :attr:`~federation.runtime.manager.ManagerSettings.shutdown_timeout` (30 s) and releases
  the Lease on the way out, so the standby takes over at its next retry (2 s). The grace
  period is that bound plus a margin for the release write and the exit, so the kubelet's
  SIGKILL never cuts a release short; were it cut, the standby would still take over after
  the 15 s lease, and the fence stops the old leader's writes 10 s after its last renewal.
- **Resources.** From bench/RESULTS.md ("Quiet machine, default sizes", 2026-11-23): the
  control plane used 4.6 CPU-s for 300 templates paced at 20/s over 15 s (0.3 core: the
  request), 4.9 CPU-s for a burst of 500 templates x 3 members done in 10.3 s (0.5 core) and
  3.0 CPU-s from a restart with 1000 templates to idle in 3.4 s (0.9 core: the limit, so a
  restart is not throttled). The bench records no memory figure; the memory request and
  limit are a first estimate (a Python process with every cluster's watch cache), to be
  replaced by a measurement (docs/install.md, "Sizing").
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from federation import __version__
from federation.rbac import roles
from federation.runtime import leader, manager

JSON = dict[str, Any]

IMAGE = "ghcr.io/federation/fedctl"
"""The image's name; its tag is the package version (``pyproject.toml``)."""
NAME = "federation-controller-manager"
"""The Deployment, its PodDisruptionBudget and NetworkPolicy (kubebuilder's naming)."""
METRICS_SERVICE = "federation-controller-manager-metrics"
WORK_SERVICE = "federation-work"
AGENT_NAMESPACE = "federation-agent"
AGENT_NAME = "federation-agent"
AGENT_TLS_SECRET = "federation-agent-tls"
AGENT_CONFIG = "federation-agent"
AGENT_BINDING = "federation:agent"
"""The ClusterRoleBinding of the member role to the agent's ServiceAccount (only)."""
AGENT_CERTIFICATE_ROLE = "federation:agent:certificate"
"""The Role (and RoleBinding) in the agent's namespace: its own certificate Secret, by name."""

DASHBOARD_SERVICE = "federation-dashboard"
DASHBOARD_PORT = 8444
DASHBOARD_RESOURCES: JSON = {"requests": {"cpu": "50m", "memory": "64Mi"},
                             "limits": {"cpu": "500m", "memory": "256Mi"}}
"""An estimate: a page render is milliseconds; each signed-in user holds a mirror of what
they may read (docs/dashboard.md, "In the cluster")."""
METRICS_PORT = 8443
HEALTH_PORT = 8081
WORK_PORT = 9443
AGENT_HEALTH_PORT = 8091
AGENT_METRICS_PORT = 8090
NONROOT = 65532
"""The image's user (distroless ``nonroot``)."""

SHUTDOWN_MARGIN = 5
"""Seconds past the manager's shutdown bound before SIGKILL: the Lease release and exit."""

MANAGER_RESOURCES: JSON = {"requests": {"cpu": "300m", "memory": "256Mi"},
                           "limits": {"cpu": "1", "memory": "1Gi"}}
"""bench/RESULTS.md, "Quiet machine, default sizes" (see the module docstring)."""
AGENT_RESOURCES: JSON = {"requests": {"cpu": "100m", "memory": "128Mi"},
                         "limits": {"cpu": "500m", "memory": "512Mi"}}
"""An estimate: one stream, one member's informers; docs/agent.md's bench has no figure."""

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
AGENT_STATE_VOLUME = "/var/lib/federation-agent"
AGENT_STATE_DIR = f"{AGENT_STATE_VOLUME}/state"
"""A directory the agent makes (and may chmod 0700: it owns it) inside the volume."""


@dataclasses.dataclass(frozen=True)
class Options:
    """What the manifests are generated for."""

    version: str = __version__
    """The image tag: the package's version, so a release's manifests run its own image."""
    image: str = IMAGE
    rbac: roles.Settings = dataclasses.field(default_factory=roles.Settings)
    """The control plane's RBAC settings (kinds, Secret namespaces, leader election)."""
    replicas: int = 2
    """Two: one leads, one waits with warm caches (a handover within the lease)."""
    election: leader.LeaderSettings = dataclasses.field(default_factory=leader.LeaderSettings)
    """Lease timings, ``fedctl run``'s defaults."""
    shards: int = 0
    """0: the replicas elect one leader that does everything. N: ``fedctl run --shards N``,
    active-active (``config/overlays/sharded``: N replicas, N shards); every shard holder
    serves the pull agents' work port, and an agent behind the work Service streams to each
    (docs/runtime.md, "Pull members with shards")."""

    @property
    def image_ref(self) -> str:
        return f"{self.image}:{self.version}"


def labels(component: str) -> dict[str, str]:
    """The selector labels of one component's pods (and of the objects that select them)."""
    return {"app.kubernetes.io/name": "federation", "app.kubernetes.io/component": component}


def _meta(name: str, namespace: str | None, component: str) -> JSON:
    meta: JSON = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**labels(component), **roles.LABELS}
    return meta


# -- the control plane ------------------------------------------------------------------------


def namespace(name: str, component: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name, None, component)}


def service_account(options: Options) -> JSON:
    """Its token is mounted only into the pods that use it (the Deployment says so)."""
    settings = options.rbac
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(settings.service_account, settings.namespace, "control-plane"),
            "automountServiceAccountToken": False}


def termination_grace() -> int:
    """The manager's shutdown bound plus :data:`SHUTDOWN_MARGIN` (module docstring)."""
    return math.ceil(manager.ManagerSettings().shutdown_timeout) + SHUTDOWN_MARGIN


def work_hosts(options: Options) -> list[str]:
    """The names the work server's certificate is valid for: its Service's DNS names."""
    ns = options.rbac.namespace
    return [f"{WORK_SERVICE}.{ns}.svc", f"{WORK_SERVICE}.{ns}.svc.cluster.local"]


def manager_args(options: Options) -> list[str]:
    s, e = options.rbac, options.election
    sharding = [f"--shards={options.shards}"] if options.shards else []
    sharding += [f"--work-bind-address=0.0.0.0:{WORK_PORT}",
                 f"--work-hosts={','.join(work_hosts(options))}"]
    return ["run",
            "--leader-elect",
            f"--leader-election-namespace={s.leader_election_namespace}",
            f"--leader-election-id={s.leader_election_id}",
            f"--leader-elect-lease-duration={int(e.lease_duration)}",
            f"--leader-elect-renew-deadline={e.renew_deadline:g}",
            f"--leader-elect-retry-period={e.retry_period:g}",
            f"--health-probe-bind-address=:{HEALTH_PORT}",
            f"--metrics-bind-address=:{METRICS_PORT}",
            "--metrics-secure",
            *sharding]


def probe(path: str, port: str, period: int, failures: int) -> JSON:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": period,
            "timeoutSeconds": 5, "failureThreshold": failures}


def pod_security() -> JSON:
    return {"runAsNonRoot": True, "runAsUser": NONROOT, "runAsGroup": NONROOT,
            "fsGroup": NONROOT, "seccompProfile": {"type": "RuntimeDefault"}}


def container_security() -> JSON:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def tmp_volume() -> tuple[JSON, JSON]:
    """/tmp, the one place fedctl writes (the self-signed metrics certificate, briefly)."""
    return ({"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
            {"name": "tmp", "mountPath": "/tmp"})


def manager_container(options: Options) -> JSON:
    volume_mount = tmp_volume()[1]
    return {
        "name": "manager", "image": options.image_ref, "imagePullPolicy": "IfNotPresent",
        "command": ["fedctl"], "args": manager_args(options),
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
                  {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
                  {"name": "work", "containerPort": WORK_PORT, "protocol": "TCP"}],
        # /readyz: caches synced and the hub reachable (a standby is ready too: it serves
        # warm). /healthz: the loop runs; 3 misses 10 s apart before a restart.
        "readinessProbe": probe("/readyz", "health", 5, 3),
        "livenessProbe": probe("/healthz", "health", 10, 3),
        "startupProbe": probe("/healthz", "health", 2, 30),
        "resources": MANAGER_RESOURCES,
        "securityContext": container_security(),
        "volumeMounts": [volume_mount],
    }


def anti_affinity(component: str) -> JSON:
    """Replicas on different nodes when there are nodes enough (preferred, not required: a
    one-node cluster still runs both, and a drain is not blocked by a full cluster)."""
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {
            "labelSelector": {"matchLabels": labels(component)},
            "topologyKey": "kubernetes.io/hostname"}}]}}


def deployment(options: Options) -> JSON:
    settings = options.rbac
    pod_labels = labels("control-plane")
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(NAME, settings.namespace, "control-plane"),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": pod_labels},
            # One replica at a time: the standby takes over while the new pod syncs.
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": {
                "metadata": {"labels": {**pod_labels, **roles.LABELS},
                             "annotations": {"kubectl.kubernetes.io/default-container":
                                             "manager"}},
                "spec": {
                    "serviceAccountName": settings.service_account,
                    # The in-cluster configuration: the hub's API through this token (the
                    # kubelet rotates it; fedctl re-reads it). No kubeconfig is mounted.
                    "automountServiceAccountToken": True,
                    "enableServiceLinks": False,
                    "securityContext": pod_security(),
                    "terminationGracePeriodSeconds": termination_grace(),
                    "affinity": anti_affinity("control-plane"),
                    "containers": [manager_container(options)],
                    "volumes": [tmp_volume()[0]],
                },
            },
        },
    }


def service(name: str, namespace_: str, port: int, port_name: str, component: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(name, namespace_, component),
            "spec": {"type": "ClusterIP", "selector": labels(component),
                     "ports": [{"name": port_name, "port": port, "targetPort": port_name,
                                "protocol": "TCP"}]}}


def services(options: Options) -> list[JSON]:
    """Secure metrics (HTTPS, a bearer token per scrape) and the pull agents' work server
    (gRPC, mutual TLS; expose it beyond the cluster for agents outside it)."""
    ns = options.rbac.namespace
    return [service(METRICS_SERVICE, ns, METRICS_PORT, "metrics", "control-plane"),
            service(WORK_SERVICE, ns, WORK_PORT, "work", "control-plane")]


def sharded_patch(options: Options) -> JSON:
    """``config/overlays/sharded``'s patch of the Deployment: ``options.shards`` replicas,
    each running ``--shards`` of that many (a strategic merge: ``args`` is replaced whole)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": options.rbac.namespace},
            "spec": {"replicas": options.shards, "template": {"spec": {"containers": [
                {"name": "manager", "args": manager_args(options)}]}}}}


def disruption_budget(options: Options) -> JSON:
    """A drain keeps one replica: the leader or a warm standby."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _meta(NAME, options.rbac.namespace, "control-plane"),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels("control-plane")}}}


def network_policy(options: Options) -> JSON:
    """Ingress to the pods: metrics and work only (both authenticate every caller). Probes
    come from the node's kubelet. Egress stays open: member API servers and notification
    endpoints are anywhere (fedctl's own outbound policy guards the latter)."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _meta(NAME, options.rbac.namespace, "control-plane"),
            "spec": {"podSelector": {"matchLabels": labels("control-plane")},
                     "policyTypes": ["Ingress"],
                     "ingress": [{"ports": [{"protocol": "TCP", "port": METRICS_PORT},
                                            {"protocol": "TCP", "port": WORK_PORT}]}]}}


def crds(documents: Sequence[JSON]) -> list[JSON]:
    """The CRDs as ``fedctl install`` applies them (``documents``: with their digests)."""
    return [dict(doc) for doc in documents]


def hub_rbac(options: Options) -> list[roles.Manifest]:
    """The hub's RBAC, exactly what ``fedctl rbac --only hub`` prints."""
    return roles.hub(options.rbac)


def manager_objects(options: Options) -> list[JSON]:
    """config/manager: the namespace, ServiceAccount, Deployment, Services and PDB."""
    return [namespace(options.rbac.namespace, "control-plane"), service_account(options),
            deployment(options), *services(options), disruption_budget(options)]


def workload_objects(options: Options) -> list[JSON]:
    """What ``fedctl install --control-plane`` applies after the CRDs and the RBAC."""
    return [*manager_objects(options), network_policy(options)]


def control_plane(options: Options, crd_documents: Sequence[JSON]) -> list[JSON]:
    """Everything ``fedctl install --control-plane --print`` prints, in an order ``kubectl
    apply -f`` can take: CRDs, the namespace, the RBAC (a Role lives in the namespace),
    then the rest."""
    objects = workload_objects(options)
    return [*crds(crd_documents), objects[0], *(m.body for m in hub_rbac(options)),
            *objects[1:]]


# -- the in-cluster dashboard (optional) --------------------------------------------------------


def dashboard_container(options: Options) -> JSON:
    """``fedctl dashboard --in-cluster`` beside the manager, with its ServiceAccount token
    for TokenReviews only (every user's reads and writes bear the user's token)."""
    return {
        "name": "dashboard", "image": options.image_ref, "imagePullPolicy": "IfNotPresent",
        "command": ["fedctl"],
        "args": ["dashboard", "--in-cluster", "--address=0.0.0.0", f"--port={DASHBOARD_PORT}"],
        "ports": [{"name": "dashboard", "containerPort": DASHBOARD_PORT, "protocol": "TCP"}],
        # TCP: every HTTP answer but the sign-in page needs a token, and the manager's
        # readiness is the pod's (the dashboard needs only the hub's TokenReview)
        "readinessProbe": {"tcpSocket": {"port": "dashboard"}, "periodSeconds": 10},
        "livenessProbe": {"tcpSocket": {"port": "dashboard"}, "periodSeconds": 20},
        "resources": DASHBOARD_RESOURCES,
        "securityContext": container_security(),
        "volumeMounts": [tmp_volume()[1]],
    }


def dashboard_patch(options: Options) -> JSON:
    """``config/dashboard``'s patch of the Deployment: the dashboard container added (a
    strategic merge keys containers by name)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": options.rbac.namespace},
            "spec": {"template": {"spec": {"containers": [dashboard_container(options)]}}}}


def dashboard_service(options: Options) -> JSON:
    """HTTPS; put an Ingress (or ``kubectl port-forward``) in front for browsers."""
    return service(DASHBOARD_SERVICE, options.rbac.namespace, DASHBOARD_PORT, "dashboard",
                   "control-plane")


def dashboard_network_patch(options: Options) -> JSON:
    """The NetworkPolicy's ingress with the dashboard's port too (a list is replaced)."""
    policy = network_policy(options)
    ports = policy["spec"]["ingress"][0]["ports"]
    return {"apiVersion": policy["apiVersion"], "kind": policy["kind"],
            "metadata": {"name": NAME, "namespace": options.rbac.namespace},
            "spec": {"ingress": [{"ports": [*ports, {"protocol": "TCP",
                                                     "port": DASHBOARD_PORT}]}]}}


# -- Prometheus (optional) --------------------------------------------------------------------


def service_monitor(options: Options) -> JSON:
    """Prometheus Operator's scrape of the metrics Service: HTTPS with Prometheus' own
    token, which fedctl checks (TokenReview, then SubjectAccessReview for ``/metrics``).
    The certificate is self-signed unless ``--metrics-cert-dir`` is given, hence no
    verification of it; bind :func:`metrics_reader` to Prometheus' ServiceAccount."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": _meta(NAME, options.rbac.namespace, "control-plane"),
            "spec": {"selector": {"matchLabels": labels("control-plane")},
                     "namespaceSelector": {"matchNames": [options.rbac.namespace]},
                     "endpoints": [{"port": "metrics", "scheme": "https", "path": "/metrics",
                                    "bearerTokenFile": f"{SERVICE_ACCOUNT_MOUNT}/token",
                                    "tlsConfig": {"insecureSkipVerify": True}}]}}


def metrics_reader() -> JSON:
    """The ClusterRole a scraper needs: ``get`` on the non-resource URL ``/metrics``."""
    return {"apiVersion": f"{roles.RBAC_GROUP}/v1", "kind": "ClusterRole",
            "metadata": _meta("federation:metrics-reader", None, "control-plane"),
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}


# -- the pull agent, in a member ----------------------------------------------------------------


def agent_rbac(options: Options) -> list[JSON]:
    """The member role a push member's control plane gets (the agent writes the same
    copies with its own credentials), bound to the agent's ServiceAccount alone."""
    role = roles.member(options.rbac)[0].body
    binding = {"apiVersion": f"{roles.RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
               "metadata": _meta(AGENT_BINDING, None, "agent"),
               "roleRef": {"apiGroup": roles.RBAC_GROUP, "kind": "ClusterRole",
                           "name": role["metadata"]["name"]},
               "subjects": [_agent_subject()]}
    return [role, binding]


def _agent_subject() -> JSON:
    return {"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": AGENT_NAMESPACE}


AGENT_CERTIFICATE_RULE = roles.Rule(
    "The agent reads its certificate, key and the work CA at each connect, and keeps a "
    "renewed certificate (an update conditional on the version read), so a restarted pod "
    "presents the certificate the hub accepts. This one Secret, by name: no list, watch, "
    "create or delete.",
    ("get", "update"), ("",), ("secrets",), (AGENT_TLS_SECRET,))
"""The agent's own certificate Secret. Only by name, so this Role lets it touch no other
Secret (the member role grants Secrets too when they are a propagated kind: the copies)."""


def agent_certificate_rbac() -> list[roles.Manifest]:
    """The Role of :data:`AGENT_CERTIFICATE_RULE` in the agent's namespace and its binding
    to the agent's ServiceAccount alone (with the rule's reason, for ``render``)."""
    meta = _meta(AGENT_CERTIFICATE_ROLE, AGENT_NAMESPACE, "agent")
    role = {"apiVersion": f"{roles.RBAC_GROUP}/v1", "kind": "Role", "metadata": meta,
            "rules": [AGENT_CERTIFICATE_RULE.to_dict()]}
    binding = {"apiVersion": f"{roles.RBAC_GROUP}/v1", "kind": "RoleBinding",
               "metadata": _meta(AGENT_CERTIFICATE_ROLE, AGENT_NAMESPACE, "agent"),
               "roleRef": {"apiGroup": roles.RBAC_GROUP, "kind": "Role",
                           "name": AGENT_CERTIFICATE_ROLE},
               "subjects": [_agent_subject()]}
    return [roles.Manifest(role, (AGENT_CERTIFICATE_RULE,)), roles.Manifest(binding)]


def agent_service_account() -> JSON:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(AGENT_NAME, AGENT_NAMESPACE, "agent"),
            "automountServiceAccountToken": False}


def agent_config() -> JSON:
    """The two values an operator sets per member (``fedctl join NAME --mode pull``)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(AGENT_CONFIG, AGENT_NAMESPACE, "agent"),
            "data": {"cluster-name": "MEMBER-NAME",
                     "hub-address": f"{WORK_SERVICE}.example.com:{WORK_PORT}"}}


def agent_secret() -> JSON:
    """The reference the operator fills with the files ``fedctl join --mode pull`` wrote;
    the agent reads it through the API and writes its renewals back to it."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": _meta(AGENT_TLS_SECRET, AGENT_NAMESPACE, "agent"),
            "data": {"tls.crt": "", "tls.key": "", "ca.crt": ""}}


def agent_args() -> list[str]:
    """The Secret is named in the pod's own namespace (a kustomize ``namespace:`` moves the
    Secret, its Role and the pod together)."""
    return ["agent", "--hub-address=$(HUB_ADDRESS)", "--cluster-name=$(CLUSTER_NAME)",
            f"--tls-secret=$(POD_NAMESPACE)/{AGENT_TLS_SECRET}", f"--state-dir={AGENT_STATE_DIR}",
            f"--health-probe-bind-address=:{AGENT_HEALTH_PORT}",
            f"--metrics-bind-address=:{AGENT_METRICS_PORT}"]


def _config_env(variable: str, key: str) -> JSON:
    return {"name": variable, "valueFrom": {"configMapKeyRef": {"name": AGENT_CONFIG,
                                                                "key": key}}}


def agent_container(options: Options) -> JSON:
    """The agent; its certificate is read from and renewed into its Secret through the API
    (no Secret volume: a mounted copy is read-only and could not keep a renewal)."""
    return {"name": "agent", "image": options.image_ref, "imagePullPolicy": "IfNotPresent",
             "command": ["fedctl"], "args": agent_args(),
             "env": [{"name": "POD_NAMESPACE",
                      "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                     _config_env("CLUSTER_NAME", "cluster-name"),
                     _config_env("HUB_ADDRESS", "hub-address")],
             "ports": [{"name": "health", "containerPort": AGENT_HEALTH_PORT, "protocol": "TCP"},
                       {"name": "metrics", "containerPort": AGENT_METRICS_PORT,
                        "protocol": "TCP"}],
             # /readyz needs a stream to the hub: not ready is a symptom, not a reason to
             # restart; /healthz is the loop.
             "readinessProbe": probe("/readyz", "health", 10, 3),
             "livenessProbe": probe("/healthz", "health", 10, 3),
             "resources": AGENT_RESOURCES, "securityContext": container_security(),
             "volumeMounts": [{"name": "state", "mountPath": AGENT_STATE_VOLUME},
                              tmp_volume()[1]]}


def agent_deployment(options: Options) -> JSON:
    """One replica, replaced not rolled: the hub accepts one stream per member (a second
    agent is refused ALREADY_EXISTS until the first is gone)."""
    pod_labels = labels("agent")
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(AGENT_NAME, AGENT_NAMESPACE, "agent"),
        "spec": {
            "replicas": 1, "selector": {"matchLabels": pod_labels},
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": {**pod_labels, **roles.LABELS},
                             "annotations": {"kubectl.kubernetes.io/default-container":
                                             "agent"}},
                "spec": {
                    "serviceAccountName": AGENT_NAME,
                    "automountServiceAccountToken": True,  # in-cluster: its own member
                    "enableServiceLinks": False,
                    "securityContext": pod_security(),
                    "terminationGracePeriodSeconds": 30,
                    "containers": [agent_container(options)],
                    "volumes": [
                        {"name": "state", "emptyDir": {"sizeLimit": "64Mi"}},
                        tmp_volume()[0]],
                },
            },
        },
    }


def agent_objects(options: Options) -> list[JSON]:
    """config/agent: everything a member needs to run its pull agent, in apply order."""
    return [namespace(AGENT_NAMESPACE, "agent"), agent_service_account(),
            *agent_rbac(options), *(m.body for m in agent_certificate_rbac()),
            agent_config(), agent_secret(),
            agent_deployment(options)]


@dataclasses.dataclass(frozen=True)
class AgentIdentity:
    """What ``fedctl join NAME --mode pull`` issued for one member's agent."""

    cluster_name: str
    hub_address: str
    """The work server as the member reaches it (``host:port``)."""
    cert: bytes
    key: bytes
    ca: bytes


def agent_for_member(options: Options, agent: AgentIdentity) -> list[JSON]:
    """config/agent with the operator's two overlays filled in for one member: the
    ConfigMap's cluster name and hub address, the Secret's certificate, key and work CA
    (what docs/install.md's kustomize overlay does with the files join wrote)."""
    filled = []
    for body in agent_objects(options):
        if body["kind"] == "ConfigMap" and body["metadata"]["name"] == AGENT_CONFIG:
            body = {**body, "data": {"cluster-name": agent.cluster_name,
                                     "hub-address": agent.hub_address}}
        elif body["kind"] == "Secret" and body["metadata"]["name"] == AGENT_TLS_SECRET:
            body = {**body, "data": {"tls.crt": _b64(agent.cert), "tls.key": _b64(agent.key),
                                     "ca.crt": _b64(agent.ca)}}
        filled.append(body)
    return filled


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
