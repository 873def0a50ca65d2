"""``fedctl get KIND [NAME]``: objects across member clusters, one table.

Like ``karmadactl get --operation-scope members``: every member context is
asked directly (no control plane needed), rows say which cluster answered, and
a cluster that cannot answer gets a line of its own instead of being left out
in silence (exit status 1 then).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from federation.commands import common, get_clusters, get_watch
from federation.contexts import client as kube
from federation.contexts import discovery, kubeconfig
from federation.hub import api, manifests

ALIASES = {
    "deploy": "Deployment", "deployment": "Deployment", "deployments": "Deployment",
    "cm": "ConfigMap", "configmap": "ConfigMap", "configmaps": "ConfigMap",
    "svc": "Service", "service": "Service", "services": "Service",
    "sts": "StatefulSet", "statefulset": "StatefulSet", "statefulsets": "StatefulSet",
    "rs": "ReplicaSet", "replicaset": "ReplicaSet", "replicasets": "ReplicaSet",
    "ns": "Namespace", "namespace": "Namespace", "namespaces": "Namespace",
    "secret": "Secret", "secrets": "Secret", "job": "Job", "jobs": "Job",
    "crd": "CustomResourceDefinition", "crds": "CustomResourceDefinition",
    "node": "Node", "nodes": "Node", "no": "Node",
}
JSON = dict[str, Any]


def kind_of(text: str) -> str:
    return ALIASES.get(text.lower(), text)


def ready_column(obj: JSON) -> str:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if obj.get("kind") in ("Deployment", "StatefulSet", "ReplicaSet"):
        return f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}"
    return ""


def age(obj: JSON) -> str:
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return ""
    created = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC)
    seconds = int((datetime.datetime.now(datetime.UTC) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


async def _one(context: kubeconfig.Context, kind: str, name: str | None,
               namespace: str | None) -> list[JSON]:
    async with kube.connect(context) as client:
        resource = await discovery.Discovery(client).find(kind)
        if name:
            try:
                return [await client.get(resource, name, namespace)]
            except kube.ApiError as exc:
                if exc.status == 404:
                    return []
                raise
        listing = await client.list(resource, namespace if resource.namespaced else None)
        items: list[JSON] = listing.get("items", [])
        for item in items:
            item.setdefault("kind", resource.kind)
        return items


async def gather(contexts: list[kubeconfig.Context], kind: str, name: str | None,
                 namespace: str | None) -> tuple[list[tuple[str, JSON]], dict[str, str]]:
    rows: list[tuple[str, JSON]] = []
    errors: dict[str, str] = {}

    async def one(context: kubeconfig.Context) -> None:
        try:
            for obj in await _one(context, kind, name, namespace):
                rows.append((context.name, obj))
        except kube.ClientError as exc:
            errors[context.name] = str(exc).removeprefix(f"{context.name}: ")

    await asyncio.gather(*(one(c) for c in contexts))
    rows.sort(key=lambda r: (r[0], r[1]["metadata"].get("namespace", ""),
                             r[1]["metadata"]["name"]))
    return rows, errors


@click.command()
@click.argument("kind")
@click.argument("name", required=False)
@click.option("-n", "--namespace", default=None, help="Namespace (default: default).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace.")
@click.option("--contexts", default=None,
              help="Member contexts, comma-separated (default: the hub's joined members that "
                   "have a context here; every context but the hub's if it has no "
                   "federation API).")
@click.option("-w", "--watch", is_flag=True,
              help="After the listing, print every change as it happens (Ctrl-C ends).")
@common.cluster_options
@common.clear_errors
def get(kind: str, name: str | None, namespace: str | None, all_namespaces: bool,
        contexts: str | None, watch: bool, kubeconfig_path: Path | None,
        hub_context: str | None) -> None:
    """Show objects of KIND across the member clusters (KIND clusters: the members)."""
    config = kubeconfig.load(kubeconfig_path)
    if kind.lower() in get_clusters.KINDS:
        if watch:
            raise click.UsageError("-w is for objects in the members, not `get clusters`")
        console = Console(width=200) if not sys.stdout.isatty() else Console()
        console.print(get_clusters.show(config.context(hub_context)))
        return
    hub = hub_context or config.current_context
    names = common.split(contexts) or _members(config, hub)
    members = [config.context(n) for n in names]
    scope = None if all_namespaces else (namespace or "default")
    if watch:
        _watch(members, kind_of(kind), name, scope)
        return
    rows, errors = asyncio.run(gather(members, kind_of(kind), name, scope))
    table = Table(box=None, pad_edge=False)
    for column in ("CLUSTER", "NAMESPACE", "NAME", "READY", "MANAGED", "AGE"):
        table.add_column(column, no_wrap=True)
    for cluster, obj in rows:
        meta = obj["metadata"]
        table.add_row(cluster, meta.get("namespace", ""), meta["name"], ready_column(obj),
                      "yes" if manifests.is_ours(obj) else "no", age(obj))
    console = Console(width=200) if not sys.stdout.isatty() else Console()
    console.print(table)
    for cluster, message in sorted(errors.items()):
        click.echo(f"error: {cluster}: {message}", err=True)
    if errors:
        sys.exit(1)


def _members(config: kubeconfig.KubeConfig, hub: str | None) -> list[str]:
    """The contexts to ask when --contexts is not given: the members the hub has joined
    (a kubeconfig also holding unrelated clusters, as ~/.kube/config does, is not asked
    about them); every context but the hub's when the hub serves no federation API (a
    fleet without the control plane) or there is no hub context."""
    others = [n for n in config.context_names if n != hub]
    if hub is None or hub not in config.context_names:
        return others
    joined = asyncio.run(joined_members(config.context(hub)))
    if joined is None:
        return others
    for name in joined:
        if name not in config.context_names:
            click.echo(f"note: {name} has no context in this kubeconfig (a pull member?): "
                       "not asked", err=True)
    return [n for n in joined if n in config.context_names]


async def joined_members(hub: kubeconfig.Context) -> list[str] | None:
    """The hub's MemberCluster names; None when the hub does not serve MemberClusters."""
    async with kube.connect(hub) as client:
        try:
            listing = await client.list(api.MEMBER_CLUSTERS)
        except kube.ApiError as exc:
            if exc.status == 404:
                return None
            if exc.status == 403:
                click.echo(f"note: {hub.name}: may not list MemberClusters: asking every "
                           "context but the hub (or name them with --contexts)", err=True)
                return None
            raise
        except kube.ClientError as exc:
            raise kube.ClusterUnavailable(hub.name, "cannot list the joined members "
                                          f"({str(exc).removeprefix(hub.name + ': ')}); "
                                          "name them with --contexts") from None
    return sorted(str(m["metadata"]["name"]) for m in listing.get("items") or [])


def _watch(members: list[kubeconfig.Context], kind: str, name: str | None,
           scope: str | None) -> None:
    """Follow every member until Ctrl-C; a line per object and per change."""
    def emit(event: str, cluster: str, obj: JSON) -> None:
        click.echo(get_watch.row(event, cluster, obj, ready_column(obj), age(obj)))

    def report(cluster: str, message: str) -> None:
        click.echo(f"error: {cluster}: {message}", err=True)

    async def follow_all() -> None:
        await asyncio.gather(*(get_watch.follow(m, kind, name, scope, emit, report)
                               for m in members))

    click.echo(get_watch.header())
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(follow_all())
