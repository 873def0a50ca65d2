"""``fedctl rbac``: print the control plane's least-privilege RBAC for review or your own tools.

The same manifests ``fedctl install`` applies (hub, and each member it
registers) and ``fedctl join --create-service-account`` applies in a joining
member, generated from the propagated kinds (:mod:`federation.rbac.roles`).
``--format table`` prints every permission with what it is for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from federation.commands import errors
from federation.rbac import roles

F = TypeVar("F", bound=Callable[..., Any])


def kinds_options(func: F) -> F:
    """--propagate-kinds and --no-default-kinds, the same for rbac, install and join."""
    func = click.option(
        "--no-default-kinds", is_flag=True,
        help="Grant only the --propagate-kinds, not the default workload kinds.")(func)
    func = click.option(
        "--propagate-kinds", "propagate_kinds", multiple=True, metavar="RESOURCE.GROUP,...",
        help="Kinds the control plane may propagate besides the defaults, as kubectl names "
             "them (widgets.example.com, configmaps); repeatable. Default kinds: "
             + ", ".join(str(k) for k in roles.DEFAULT_KINDS) + ".")(func)
    return func


def secret_namespaces_option(func: F) -> F:
    """--secret-namespaces, for rbac and install."""
    return click.option(
        "--secret-namespaces", "secret_namespaces", multiple=True, metavar="NAMESPACE,...",
        help="Hub namespaces whose Secrets the control plane may read and propagate (a "
             f"RoleBinding of ClusterRole {roles.SECRETS_ROLE} in each); repeatable. Never "
             "a kube-* namespace or federation-system. Secrets elsewhere stay unread.")(func)


def export_service_option(func: F) -> F:
    """--export-service, for rbac, install and join."""
    return click.option(
        "--export-service", "export_service", is_flag=True,
        help="Also grant the member role Endpoints (get, list, watch, create, update, patch, "
             "delete) for Application export-service steps, which `fedctl run "
             "--export-service-allow` enables (docs/security.md, Applications: "
             "export-service). Off by default: Endpoints are never propagated.")(func)


def settings(propagate_kinds: tuple[str, ...], no_default_kinds: bool,
             secret_namespaces: tuple[str, ...] = (), **overrides: Any) -> roles.Settings:
    """Generator settings from the kinds options (raises :class:`roles.RBACError`)."""
    kinds = roles.parse_kinds(propagate_kinds, defaults=not no_default_kinds)
    return roles.Settings(kinds=kinds,
                          secret_namespaces=roles.parse_secret_namespaces(secret_namespaces),
                          **overrides)


@click.command()
@kinds_options
@secret_namespaces_option
@export_service_option
@click.option("--only", type=click.Choice(["hub", "member"]), default=None,
              help="Print only the hub's or only a member's manifests.")
@click.option("--format", "output", type=click.Choice(["yaml", "table"]), default="yaml",
              show_default=True, help="Manifests (with reasons as comments), or a Markdown "
                                      "table of every permission and what it is for.")
@click.option("--leader-election-namespace", default=roles.Settings.leader_election_namespace,
              show_default=True, help="As given to `fedctl run`.")
@click.option("--leader-election-id", default=roles.Settings.leader_election_id,
              show_default=True, help="As given to `fedctl run`: the only Lease it may renew.")
@errors.clear_errors_for(roles.RBACError)
def rbac(propagate_kinds: tuple[str, ...], no_default_kinds: bool,
         secret_namespaces: tuple[str, ...], export_service: bool, only: str | None,
         output: str, leader_election_namespace: str, leader_election_id: str) -> None:
    """Print the control plane's RBAC (ClusterRoles, Roles, bindings) for hub and members."""
    chosen = settings(propagate_kinds, no_default_kinds, secret_namespaces,
                      export_service=export_service,
                      leader_election_namespace=leader_election_namespace,
                      leader_election_id=leader_election_id)
    sections = {"hub": roles.hub(chosen), "member": roles.member(chosen)}
    if only is not None:
        sections = {only: sections[only]}
    if output == "table":
        click.echo(roles.table(sections), nl=False)
        return
    documents = [m for manifests in sections.values() for m in manifests]
    documents = roles.namespace_manifests(documents) + documents
    heading = (f"The federation control plane's RBAC ({' and '.join(sections)}), for "
               f"{chosen.user} and ServiceAccount {chosen.namespace}/"
               f"{chosen.service_account}.\nPropagated kinds: "
               + ", ".join(str(k) for k in chosen.kinds) + ".\nSecrets readable in: "
               + (", ".join(chosen.secret_namespaces) or "no namespace (--secret-namespaces)")
               + ".")
    click.echo(roles.render(documents, heading), nl=False)
