"""Members that join at runtime: MemberClusters with a kubeconfig Secret are engaged live.

For a MemberCluster whose ``spec.kubeconfigSecretRef`` names a Secret on the
hub (what ``fedctl join`` writes), this controller reads the Secret (a live
GET: Secrets are never cached by the control plane), checks the kubeconfig
again (:func:`federation.contexts.minify.load`: one context, files inlined,
exec plugin on the allowlist), adds the cluster to the ClusterSet and has the
manager engage it: its informers start with every watch's handlers, the
health controller starts probing it, propagation can place on it. A changed
Secret (new resourceVersion) re-engages the cluster with the new credentials;
a deleted MemberCluster disengages it: one call (``Manager.disengage``) stops its
engagement (prober, informers, tasks, connections) and tells the leave listeners
(the kinds discovered in it, the health controller's capacity clock); copies in
it are left alone: ``fedctl unjoin`` moves or orphans them first.

The reference itself is checked first, by this controller and not only by RBAC: it
must name a Secret of the credentials namespace (``federation-system``, where ``fedctl
join`` writes them), and not one of the CA Secrets kept there; any other is refused with
that rule as the ``JoinFailed`` reason before anything is read. The kubeconfig is read
within limits (:func:`federation.contexts.kubeconfig.parse`): a hostile Secret (invalid
UTF-8, deep nesting, a huge number, Python tags...) is a refusal naming the Secret and
the reason, never a crash and never a quote of its content.

A static context of the same name (from ``fedctl run --contexts``) wins: the
Secret is ignored and a warning event says so. A Secret that cannot be used
(missing, or refused: an exec plugin off the allowlist, an ``exec.env`` setting
``PATH``...) is never used for anything: the cluster is recorded as refused
(:meth:`ClusterSet.refuse`, misconfigured with the reason), a ``JoinFailed``
warning event names the reason (once per distinct reason; the Secret is read
again every :data:`RETRY` seconds), and the health controller reports the
MemberCluster ``Ready=Unknown`` (``NotEngaged``) with the reason as its message.

A MemberCluster with ``spec.mode: Pull`` has no Secret: its agent dials the work server
(``fedctl run --work-bind-address``, :mod:`federation.work`). It is registered there and
joined as a cluster whose client is the work stream
(:class:`~federation.work.pull.WorkClient`), so every controller treats it as any
member; it is ready while its agent streams heartbeats. Without a work server it is
refused with that reason. Deleting it (or switching it to Push) unregisters it: a stream
of its agent is closed, and the agent's next one is told NOT_FOUND (it stops keeping the
member's objects).

Its agent's certificate is recorded in ``status.agentCertificate``
(:class:`~federation.work.identity.CertificateRecord`): ``fedctl join`` writes it when it
issues one, the work server through :meth:`Reconciler.record_certificate` when it renews
one, and this controller hands every change to the work server, which refuses any other
serial and closes a live stream whose certificate a re-join revoked.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from federation.contexts import client as kube
from federation.contexts import kubeconfig, minify
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ApiError
from federation.contexts.clusters import Cluster
from federation.controllers.kit import events
from federation.controllers.kit.kinds import KindTracker
from federation.hub import api
from federation.hub import clusters as hub_clusters
from federation.hub.rollouts import RELOADER_CA_SECRET
from federation.rbac import roles
from federation.runtime import controller, manager
from federation.runtime.reconcile import Request, Result
from federation.work import identity, pull

if TYPE_CHECKING:  # grpc is loaded only when a work server is configured
    from federation.work.server import WorkServer

log = logging.getLogger("federation.membership")
SECRETS = kube.Resource("", "v1", "secrets", "Secret")
RETRY = 10.0
"""Seconds before a join that failed (Secret missing or unusable) is tried again."""
CREDENTIALS_NAMESPACE = roles.NAMESPACE
"""The one namespace kubeconfig Secrets are read from (where `fedctl join` writes them)."""
CA_SECRETS = frozenset({identity.SECRET_NAME, RELOADER_CA_SECRET})
"""Secrets of the credentials namespace that hold CA keys, never a kubeconfig."""
RULE = (f"kubeconfigSecretRef must name a Secret in {CREDENTIALS_NAMESPACE}, the credentials "
        "namespace")
"""The rule a refused reference breaks, named in its JoinFailed reason."""


@dataclasses.dataclass(frozen=True)
class SecretRef:
    """A MemberCluster's ``spec.kubeconfigSecretRef``, checked."""

    namespace: str
    name: str
    key: str


def secret_ref(ref: object) -> SecretRef | str:
    """The reference, or why it is refused (:data:`RULE`, names checked, no CA Secret): a
    MemberCluster writer may point the control plane at a kubeconfig, never make it read
    another namespace's Secrets, whatever RBAC would allow."""
    if not isinstance(ref, Mapping):
        return "spec.kubeconfigSecretRef is not a mapping"
    namespace, name, key = (ref.get(k) for k in ("namespace", "name", "key"))
    if namespace != CREDENTIALS_NAMESPACE:
        shown = repr(namespace[:63]) if isinstance(namespace, str) and namespace else "none"
        return f"{RULE}; it names namespace {shown}"
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return "spec.kubeconfigSecretRef.name is not a Secret name"
    if name in CA_SECRETS:
        return f"{RULE}; {name} holds a CA key, not a kubeconfig"
    if key is not None and (not isinstance(key, str) or not _KEY.fullmatch(key)):
        return "spec.kubeconfigSecretRef.key is not a Secret key"
    return SecretRef(namespace, name, key or minify.SECRET_KEY)


_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


class Reconciler:
    def __init__(self, mgr: manager.Engager, recorder: events.EventSink,
                 allowed_exec: Iterable[str] = (), work: WorkServer | None = None) -> None:
        self.mgr = mgr
        self.work = work
        self.pull: set[str] = set()
        """Clusters joined in pull mode (their client is a work stream)."""
        self.recorder = recorder
        self.allowed_exec = tuple(allowed_exec)
        self.hub = mgr.clusters.hub.name
        self.versions: dict[str, str] = {}
        """Joined cluster -> resourceVersion of the Secret it was engaged from."""
        self.refusals: dict[str, str] = {}
        """Refused cluster -> the reason last reported (an event only when it changes)."""
        if work is not None:
            work.recorder = self.record_certificate
            work.membership = self.is_pull_member

    async def reconcile(self, request: Request) -> Result | None:
        name = request.name
        doc = await self.mgr.client.get(api.MEMBER_CLUSTERS, name, cluster=self.hub,
                                        copy=False)
        spec = (doc or {}).get("spec") or {}
        ref = spec.get("kubeconfigSecretRef")
        mode = spec.get("mode") or "Push"
        if hub_clusters.leaving(doc) or (mode == "Push" and not ref):
            await self._leave(name)
            self.refusals.pop(name, None)
            return None
        assert doc is not None
        existing = self.mgr.clusters.clusters.get(name)
        if existing is not None and not existing.joined:
            await self.recorder.emit(doc, "Warning", "JoinIgnored",
                                     f"a static context named {name} is engaged; its "
                                     f"{'mode: Pull' if mode == 'Pull' else 'kubeconfigSecretRef'}"
                                     " is ignored")
            return None
        if mode == "Pull":
            return await self._join_pull(doc, name, existing)
        if mode != "Push":
            return await self._refuse(doc, name, f"spec.mode {mode!r} is not Push or Pull")
        if name in self.pull:
            await self._leave(name)
        assert ref  # Push without a Secret left above
        source = secret_ref(ref)
        if isinstance(source, str):  # refused by our own rule, before anything is read
            return await self._refuse(doc, name, source)
        try:
            secret = await self.mgr.client.cluster(self.hub).get(
                SECRETS, source.name, source.namespace)
            version = str(secret["metadata"].get("resourceVersion"))
            if self.versions.get(name) == version and existing is not None:
                return None
            config = minify.load(minify.secret_kubeconfig(secret, source.key), name,
                                 f"Secret {source.namespace}/{source.name}", self.allowed_exec)
        except (ApiError, kubeconfig.KubeconfigError, ValueError) as exc:
            return await self._refuse(doc, name, str(exc))
        await self._leave(name)
        cluster = self.mgr.clusters.join(name, config)
        if cluster.error:  # its client refused the context (the exec command not on PATH...)
            return await self._refuse(doc, name, cluster.error)
        self.mgr.engage(cluster)
        self.versions[name] = version
        self.refusals.pop(name, None)
        log.info("cluster %s joined from Secret %s/%s: %s", name, source.namespace,
                 source.name, cluster.detail)
        if not _was_ready(doc):  # re-engaging at our own restart is not news
            await self.recorder.emit(doc, "Normal", "Joined", f"engaged from Secret "
                                                             f"{source.namespace}/{source.name}")
        return None

    async def _join_pull(self, doc: ReadOnly, name: str, existing: Cluster | None
                         ) -> Result | None:
        if self.work is None:
            return await self._refuse(doc, name, "spec.mode is Pull but this control plane "
                                                 "serves no work stream (fedctl run "
                                                 "--work-bind-address)")
        if name in self.pull and existing is not None:
            await self._follow_certificate(name, doc)
            return None
        await self._leave(name)
        state = self.work.register(name, identity.CertificateRecord.of(doc))
        hub = self.mgr.clusters.hub
        cluster = Cluster(name, client=pull.WorkClient(state),
                          settings=hub.settings)
        self.mgr.clusters.adopt(cluster)
        self.mgr.engage(cluster)
        self.pull.add(name)
        self.refusals.pop(name, None)
        log.info("cluster %s joined in pull mode: waiting for its agent", name)
        if not _was_ready(doc):
            await self.recorder.emit(doc, "Normal", "Joined",
                                     "pull mode: engaged when its agent connects")
        return None

    async def _follow_certificate(self, name: str, doc: ReadOnly) -> None:
        """Hand a changed certificate record to the work server. The cache may be behind
        the work server's own renewal write, so a difference is read again, live."""
        assert self.work is not None
        state = self.work.states.get(name)
        if state is None or identity.CertificateRecord.of(doc) == state.certificate:
            return
        live = await self.mgr.client.cluster(self.hub).get(api.MEMBER_CLUSTERS, name)
        record = identity.CertificateRecord.of(live)
        if record != state.certificate:
            log.info("cluster %s: agent certificate serial %s now accepted%s", name,
                     record.serial or "(none)",
                     f" (and {record.previous} until it is used)" if record.previous else "")
            state.track(record)

    async def record_certificate(self, name: str, record: identity.CertificateRecord,
                                 presented: str) -> None:
        """Write ``record`` to the MemberCluster's status, only if the record there still
        accepts the ``presented`` serial (a re-join meanwhile wins: IdentityError)."""
        writer = self.mgr.client.cluster(self.hub)
        live = await writer.get(api.MEMBER_CLUSTERS, name)
        if not identity.CertificateRecord.of(live).accepts(presented):
            raise identity.IdentityError(f"renewal: certificate serial {presented} of "
                                         f"cluster {name!r} was revoked meanwhile")
        await writer.patch_status(api.MEMBER_CLUSTERS, name, record.status_patch(),
                                  resource_version=live["metadata"]["resourceVersion"])

    def is_pull_member(self, name: str) -> bool | None:
        """Whether the hub's MemberClusters make ``name`` a pull member; None until this
        process serves agents (leads; with shards, holds a shard) and its cache of them is
        synced (a starting control plane does not know yet, and must not tell an agent it
        left)."""
        hub = self.mgr.clusters.hub
        informer = hub.cache.informers.get(api.MEMBER_CLUSTERS) if hub.cache else None
        if not self._serving() or informer is None or not informer.synced.is_set():
            return None
        doc = informer.store.get(None, name)
        spec = (doc or {}).get("spec") or {}
        return spec.get("mode") == "Pull" and not hub_clusters.leaving(doc)

    def _serving(self) -> bool:
        """Whether this replica serves agents: it leads, or with shards holds a shard (the
        work server's ``leading`` says which)."""
        if self.work is not None and self.work.leading is not None:
            return self.work.leading()
        return self.mgr.is_leader

    async def _refuse(self, doc: ReadOnly, name: str, reason: str) -> Result:
        """Nothing of a refused Secret is used: the cluster is known with the reason only."""
        await self._leave(name)
        self.mgr.clusters.refuse(name, f"not joined: {reason}")
        if self.refusals.get(name) != reason:
            self.refusals[name] = reason
            if not _ready_says(doc, reason):  # recorded before our restart: said already
                await self.recorder.emit(doc, "Warning", "JoinFailed", reason)
            log.warning("cannot engage %s: %s", name, reason)
        return Result(requeue_after=RETRY)

    async def _leave(self, name: str) -> None:
        cluster = self.mgr.clusters.clusters.get(name)
        if cluster is None or not cluster.joined:
            return
        await self.mgr.disengage(name)
        self.versions.pop(name, None)
        if name in self.pull:
            self.pull.discard(name)
            if self.work is not None:
                self.work.unregister(name)
        if not cluster.error:  # a refused join: nothing was engaged, nothing to report
            log.info("cluster %s left", name)


def forget_kinds(kinds: KindTracker) -> Callable[[str], None]:
    """A leave listener: the resources discovered in a member that left are forgotten."""

    def forget(name: str) -> None:
        for key in [k for k in kinds.member_resources if k[0] == name]:
            del kinds.member_resources[key]

    return forget


def install(mgr: manager.Manager, recorder: events.EventSink,
            kinds: KindTracker | None = None, allowed_exec: Iterable[str] = (),
            work: WorkServer | None = None) -> None:
    """Add the ``membership`` controller to a manager."""
    ctl = controller.Controller("membership", Reconciler(mgr, recorder, allowed_exec, work),
                                workers=1)
    ctl.watch(api.MEMBER_CLUSTERS, clusters="hub")
    if kinds is not None:
        mgr.clusters.on_leave(forget_kinds(kinds))
    mgr.add(ctl)


def _ready_condition(doc: ReadOnly) -> ReadOnly:
    for condition in (doc.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


def _was_ready(doc: ReadOnly) -> bool:
    """The MemberCluster says Ready: it was engaged before (this process restarted)."""
    return _ready_condition(doc).get("status") == "True"


def _ready_says(doc: ReadOnly, reason: str) -> bool:
    """The MemberCluster's Ready condition already carries this refusal's reason."""
    return reason in str(_ready_condition(doc).get("message") or "")
