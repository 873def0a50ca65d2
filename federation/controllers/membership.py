"""Members that join at runtime: MemberClusters with a kubeconfig Secret are engaged live.

For a MemberCluster whose ``spec.kubeconfigSecretRef`` names a Secret on the
hub (what ``fedctl join`` writes), this controller reads the Secret (a live
GET: Secrets are never cached by the control plane), checks the kubeconfig
again (:func:`federation.contexts.minify.load`: one context, files inlined,
exec plugin on the allowlist), adds the cluster to the ClusterSet and has the
manager engage it: its informers start with every watch's handlers, the
health controller starts probing it, propagation can place on it. A changed
Secret (new resourceVersion) re-engages the cluster with the new credentials;
a deleted MemberCluster disengages it (caches stopped, connections closed;
copies in it are left alone: ``fedctl unjoin`` moves or orphans them first).

A static context of the same name (from ``fedctl run --contexts``) wins: the
Secret is ignored and a warning event says so. A Secret that cannot be used
gives a ``JoinFailed`` warning event on the MemberCluster, and the health
controller reports it ``Ready=Unknown`` (``NotEngaged``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from federation.contexts import client as kube
from federation.contexts import kubeconfig, minify
from federation.contexts.client import ApiError
from federation.controllers import api, events
from federation.controllers.kinds import KindTracker
from federation.runtime import controller, manager
from federation.runtime.reconcile import Request, Result

log = logging.getLogger("federation.membership")
SECRETS = kube.Resource("", "v1", "secrets", "Secret")
RETRY = 10.0
"""Seconds before a join that failed (Secret missing or unusable) is tried again."""


class Reconciler:
    def __init__(self, mgr: manager.Manager, recorder: events.Recorder,
                 kinds: KindTracker | None = None,
                 allowed_exec: Iterable[str] = ()) -> None:
        self.mgr = mgr
        self.recorder = recorder
        self.kinds = kinds
        self.allowed_exec = tuple(allowed_exec)
        self.hub = mgr.clusters.hub.name
        self.versions: dict[str, str] = {}
        """Joined cluster -> resourceVersion of the Secret it was engaged from."""

    async def reconcile(self, request: Request) -> Result | None:
        name = request.name
        doc = await self.mgr.client.get(api.MEMBER_CLUSTERS, name, cluster=self.hub)
        ref = ((doc or {}).get("spec") or {}).get("kubeconfigSecretRef")
        if doc is None or doc["metadata"].get("deletionTimestamp") or not ref:
            await self._leave(name)
            return None
        existing = self.mgr.clusters.clusters.get(name)
        if existing is not None and not existing.joined:
            await self.recorder.emit(doc, "Warning", "JoinIgnored",
                                     f"a static context named {name} is engaged; its "
                                     "kubeconfigSecretRef is ignored")
            return None
        try:
            secret = await self.mgr.client.cluster(self.hub).get(
                SECRETS, ref["name"], ref.get("namespace"))
            version = str(secret["metadata"].get("resourceVersion"))
            if self.versions.get(name) == version and existing is not None:
                return None
            config = minify.load(minify.secret_kubeconfig(secret, ref.get("key") or
                                                          minify.SECRET_KEY),
                                 name, f"Secret {ref.get('namespace')}/{ref['name']}",
                                 self.allowed_exec)
        except (ApiError, kubeconfig.KubeconfigError, ValueError) as exc:
            await self._leave(name)
            message = str(exc)
            await self.recorder.emit(doc, "Warning", "JoinFailed", message)
            log.warning("cannot engage %s: %s", name, message)
            return Result(requeue_after=RETRY)
        await self._leave(name)
        cluster = self.mgr.clusters.join(name, config)
        self.mgr.engage(cluster)
        self.versions[name] = version
        log.info("cluster %s joined from Secret %s/%s: %s", name, ref.get("namespace"),
                 ref["name"], cluster.detail)
        await self.recorder.emit(doc, "Normal", "Joined", f"engaged from Secret "
                                                         f"{ref.get('namespace')}/{ref['name']}")
        return None

    async def _leave(self, name: str) -> None:
        cluster = self.mgr.clusters.clusters.get(name)
        if cluster is None or not cluster.joined:
            return
        await self.mgr.disengage(name)
        self.versions.pop(name, None)
        if self.kinds is not None:
            for key in [k for k in self.kinds.member_resources if k[0] == name]:
                del self.kinds.member_resources[key]
        log.info("cluster %s left", name)


def install(mgr: manager.Manager, recorder: events.Recorder,
            kinds: KindTracker | None = None, allowed_exec: Iterable[str] = ()) -> None:
    """Add the ``membership`` controller to a manager."""
    ctl = controller.Controller("membership", Reconciler(mgr, recorder, kinds, allowed_exec),
                                workers=1)
    ctl.watch(api.MEMBER_CLUSTERS, clusters="hub")
    mgr.add(ctl)
