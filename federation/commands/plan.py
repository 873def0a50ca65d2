"""``fedctl plan``: compute placements offline from policy, workload and cluster files.

The command is a thin shell over :mod:`federation.placement`: it reads the
files, hands their text to the loader, runs :func:`engine.plan` and prints the
decisions as a rich table or as the JSON document other tools (and a later
``--previous``) consume. It needs no cluster and writes nothing.

Exit status: 0 when every resource was placed, 1 when the command could not
run (bad option, unreadable file, malformed or invalid input; nothing is
planned), 2 when the plan was printed but at least one placement has an error.
Keeping "bad input" apart from "a placement failed" lets scripts tell a typo
from an unschedulable workload.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

import click
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from federation.hub import manifests as manifests_
from federation.hub import overrides
from federation.placement import clusters as clusters_
from federation.placement import engine, loader
from federation.placement import policy as policy_
from federation.placement import resources as resources_
from federation.untrusted import documents

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_PLACEMENT_ERROR = 2


class _BadUsage(click.UsageError):
    exit_code = EXIT_BAD_INPUT

    def show(self, file: IO[Any] | None = None) -> None:
        """One line, like every other bad input (click would print the usage around it)."""
        message = loader.one_line(self.format_message())
        click.echo(f"error: {message} (see 'fedctl plan --help')", err=True)


class _PlanCommand(click.Command):
    """Usage errors exit 1 like other bad input (2 means a placement failed)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as error:
            raise _BadUsage(error.format_message(), error.ctx) from None


HELP = """Compute placements offline: which clusters get each workload, and how many replicas.

\b
Every -f file may hold several YAML documents: PropagationPolicy,
ClusterPropagationPolicy, OverridePolicy and ClusterOverridePolicy objects
(apiVersion policy.federation.io/v1alpha1 or policy.karmada.io/v1alpha1) and
the resources to place (Deployments, ...). --show-manifests prints the copy
each cluster would get, overrides applied (as YAML after the table, or as
"manifests" in -o json).

\b
CLUSTERS.yaml:
  clusters:
  - name: eu-1
    labels: {tier: gold}
    region: eu
    zone: eu-1a
    provider: aws
    taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
    availableReplicas: 10   # room for more replicas; absent = unlimited
    ready: true             # default true

\b
--previous takes a former `-o json` output; the sticky modes (dynamic weights,
Aggregated) then move as few replicas as possible. --fail NAME marks a cluster
as not ready to see where its replicas would go.

\b
--live reads policies, templates, MemberClusters and current decisions from
the hub instead of files (-f and --clusters are then not needed): with
--fail NAME it shows where replicas would go if NAME failed and stayed down,
moving only those of policies that opted into failover (a toleration of
cluster.federation.io/not-ready:NoExecute with tolerationSeconds).

\b
Exit status:
  0  every resource was placed
  1  bad option or input (unreadable file, malformed YAML/JSON, invalid field,
     a file over a limit: 4 MiB, 100 levels of nesting, 100,000 values after
     expanding aliases, 10,000 documents); one line on stderr names the file
     and field; nothing is planned
  2  the plan was printed but at least one placement has an error
"""


@click.command("plan", cls=_PlanCommand, help=HELP)
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    metavar="FILE",
    help="Policy and workload YAML (repeatable; required without --live).",
)
@click.option("--clusters", "clusters_file", metavar="FILE",
              help="Clusters YAML (required without --live).")
@click.option("--previous", "previous_file", metavar="FILE", help="A previous -o json output.")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.option("--explain", is_flag=True, help="Show each decision's explanation (table output).")
@click.option(
    "--fail",
    "failed",
    multiple=True,
    metavar="NAME",
    help="Treat this cluster as failed / not ready (repeatable).",
)
@click.option("--show-manifests", is_flag=True,
              help="Show each cluster's copy of each resource, overrides applied.")
@click.option("--live", is_flag=True, help="Read everything from the hub (what-if on the "
                                          "running federation).")
@click.option("--kubeconfig", "kubeconfig_path", metavar="FILE", default=None,
              help="With --live: kubeconfig (default: $KUBECONFIG, else ~/.kube/config).")
@click.option("--hub-context", "--context", "hub_context", default=None,
              help="With --live: the hub's context (--context is kubectl's spelling).")
@click.pass_context
def plan(
    ctx: click.Context,
    files: Sequence[str],
    clusters_file: str | None,
    previous_file: str | None,
    output: str,
    explain: bool,
    failed: Sequence[str],
    show_manifests: bool,
    live: bool,
    kubeconfig_path: str | None,
    hub_context: str | None,
) -> None:
    rendered: Rendered = {}
    try:
        if live:
            if show_manifests:
                raise _BadUsage("--show-manifests works on files, not with --live", ctx)
            planned = _run_live(kubeconfig_path, hub_context, failed)
        elif not files or not clusters_file:
            option = "'--clusters'" if files else "'-f' / '--filename'"
            raise _BadUsage(f"Missing option {option} (or --live to read the hub).", ctx)
        else:
            planned, rendered = _run(files, clusters_file, previous_file, failed)
    except loader.LoadError as error:
        click.echo(f"error: {error}", err=True)
        ctx.exit(EXIT_BAD_INPUT)
    if output == "json":
        document = as_json(planned)
        if show_manifests:
            for entry, p in zip(document["placements"], planned, strict=True):
                entry["manifests"] = rendered.get(p.resource.key, {})
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(as_table(planned, explain), nl=False)
        if show_manifests:
            click.echo(manifests_text(planned, rendered), nl=False)
    failures = any(p.decision.error is not None for p in planned) or any(
        isinstance(copy, str) for copies in rendered.values() for copy in copies.values())
    ctx.exit(EXIT_PLACEMENT_ERROR if failures else EXIT_OK)


def _read(path: str) -> loader.Source:
    """The file's text; never reads more than one byte past the size limit."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(documents.LIMITS.max_bytes + 1)
    except OSError as error:
        raise loader.LoadError(path, "", f"cannot read: {error.strerror or error}") from None
    return loader.decode(path, data)


Rendered = dict[resources_.ResourceKey, dict[str, "dict[str, Any] | str"]]
"""Resource -> cluster -> its copy with overrides applied, or why no copy is sent."""


def _run(
    files: Sequence[str], clusters_file: str, previous_file: str | None, failed: Sequence[str]
) -> tuple[list[engine.Planned], Rendered]:
    manifests = loader.parse_manifests([_read(f) for f in files])
    if not manifests.resources:
        raise loader.LoadError(", ".join(files), "", "no resources to place in these files")
    override_policies = [_override(doc) for doc in manifests.overrides]
    clusters = loader.parse_clusters(_read(clusters_file))
    unknown = sorted(set(failed) - {c.name for c in clusters})
    if unknown:
        raise loader.LoadError(
            "--fail", "", f"no cluster named {', '.join(unknown)} in {clusters_file}"
        )
    previous = loader.parse_previous(_read(previous_file)) if previous_file else {}
    fleet = clusters_.Fleet(clusters_.mark_failed(clusters, failed))
    planned = engine.plan(manifests.resources, manifests.policies, fleet, previous)
    return planned, render_copies(planned, manifests.documents, override_policies, fleet)


def _override(found: loader.OverrideDocument) -> overrides.OverridePolicy:
    """An override policy of the inputs, validated as the hub's controller does."""
    try:
        return overrides.validate(found.document)
    except overrides.OverrideError as error:
        path, _, message = str(error).partition(": ")
        if not message:
            path, message = "", path
        full = f"{found.prefix}.{path}" if found.prefix and path else (found.prefix or path)
        raise loader.LoadError(found.where, full, message) from None


def render_copies(planned: Sequence[engine.Planned],
                  documents_: Mapping[resources_.ResourceKey, Mapping[str, Any]],
                  chosen: Sequence[overrides.OverridePolicy],
                  fleet: clusters_.Fleet) -> Rendered:
    """Each placed resource's copy per cluster, as propagation renders it (replicas of a
    divided workload set, then every override that targets the cluster)."""
    found: Rendered = {}
    for p in planned:
        if p.policy is None or not p.decision.ok or p.resource.key not in documents_:
            continue
        divided = policy_.mode(p.policy.spec.placement) is not policy_.Mode.DUPLICATED
        applicable = overrides.applicable(chosen, p.resource)
        copies: dict[str, dict[str, Any] | str] = {}
        for cluster, replicas in p.decision.clusters.items():
            manifest = manifests_.render(documents_[p.resource.key], replicas, divided)
            try:
                copies[cluster] = overrides.apply_all(manifest, fleet.by_name[cluster],
                                                      applicable).manifest
            except overrides.OverrideError as error:
                copies[cluster] = f"not propagated: {error}"
        found[p.resource.key] = copies
    return found


def manifests_text(planned: Sequence[engine.Planned], rendered: Rendered) -> str:
    """The copies as YAML documents, each headed by its resource and cluster."""
    text = ""
    for p in planned:
        for cluster, copy in rendered.get(p.resource.key, {}).items():
            text += f"---\n# {p.resource.ref} in {cluster}\n"
            text += f"# {copy}\n" if isinstance(copy, str) else \
                yaml.safe_dump(copy, sort_keys=False)
    return text


def _run_live(kubeconfig_path: str | None, hub_context: str | None,
              failed: Sequence[str]) -> list[engine.Planned]:
    import asyncio

    from federation.commands import plan_live
    from federation.contexts import client as kube
    from federation.contexts import kubeconfig

    try:
        context = kubeconfig.load(kubeconfig_path).context(hub_context)
        state = asyncio.run(plan_live.read(context))
    except (kubeconfig.KubeconfigError, kube.ClientError, OSError) as error:
        raise loader.LoadError("--live", "", str(error)) from None
    missing = plan_live.unknown(state, failed)
    if missing:
        raise loader.LoadError("--fail", "", f"no MemberCluster named {', '.join(missing)} "
                                             "on the hub")
    return plan_live.what_if(state, failed)


def as_json(planned: Sequence[engine.Planned]) -> dict[str, Any]:
    """The ``-o json`` document (also what ``--previous`` reads)."""
    return {"placements": [_placement_json(p) for p in planned]}


def _placement_json(planned: engine.Planned) -> dict[str, Any]:
    resource, decision = planned.resource, planned.decision
    return {
        "resource": {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "namespace": resource.namespace,
            "name": resource.name,
        },
        "policy": planned.policy.ref if planned.policy else None,
        "replicas": resource.replicas,
        "clusters": [{"name": n, "replicas": r} for n, r in sorted(decision.nonzero().items())],
        "explanation": list(decision.explanation),
        "error": decision.error,
    }


def as_table(planned: Sequence[engine.Planned], explain: bool) -> str:
    """The ``-o table`` rendering, with explanations below the table when asked."""
    # A terminal wraps to its width; piped output (a file, a test, CI) is not wrapped at an
    # inherited width, as `fedctl get` does.
    width = shutil.get_terminal_size((120, 24)).columns if sys.stdout.isatty() else 200
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    table = Table(box=None, pad_edge=False)
    for column in ("RESOURCE", "POLICY", "REPLICAS", "CLUSTERS", "STATUS"):
        table.add_column(column, justify="right" if column == "REPLICAS" else "left")
    for p in planned:
        cells = (p.resource.ref, p.policy.ref if p.policy else "-", str(p.resource.replicas))
        table.add_row(*(Text(cell) for cell in (*cells, _clusters_cell(p), _status(p))))
    console.print(table)
    text = "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
    if explain:
        for p in planned:
            text += f"\n{p.resource.ref}:\n"
            text += "".join(f"  - {line}\n" for line in p.decision.explanation)
            if p.decision.error is not None:
                text += f"  = error: {p.decision.error}\n"
    return text


def _clusters_cell(planned: engine.Planned) -> str:
    decision = planned.decision
    shown = decision.nonzero() if planned.resource.replicas else dict(decision.clusters)
    return " ".join(f"{name}={n}" for name, n in shown.items()) or "-"


def _status(planned: engine.Planned) -> str:
    decision = planned.decision
    if decision.error is not None:
        return f"error: {decision.error}"
    return f"pending {decision.pending}" if decision.pending else "ok"
