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
from collections.abc import Sequence
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from federation.placement import clusters as clusters_
from federation.placement import documents, engine, loader

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
Every -f file may hold several YAML documents: PropagationPolicy and
ClusterPropagationPolicy objects (apiVersion policy.federation.io/v1alpha1 or
policy.karmada.io/v1alpha1) and the resources to place (Deployments, ...).

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
@click.option("--live", is_flag=True, help="Read everything from the hub (what-if on the "
                                          "running federation).")
@click.option("--kubeconfig", "kubeconfig_path", metavar="FILE", default=None,
              help="With --live: kubeconfig (default: $KUBECONFIG, else ~/.kube/config).")
@click.option("--hub-context", default=None, help="With --live: the hub's context.")
@click.pass_context
def plan(
    ctx: click.Context,
    files: Sequence[str],
    clusters_file: str | None,
    previous_file: str | None,
    output: str,
    explain: bool,
    failed: Sequence[str],
    live: bool,
    kubeconfig_path: str | None,
    hub_context: str | None,
) -> None:
    try:
        if live:
            planned = _run_live(kubeconfig_path, hub_context, failed)
        elif not files or not clusters_file:
            option = "'--clusters'" if files else "'-f' / '--filename'"
            raise _BadUsage(f"Missing option {option} (or --live to read the hub).", ctx)
        else:
            planned = _run(files, clusters_file, previous_file, failed)
    except loader.LoadError as error:
        click.echo(f"error: {error}", err=True)
        ctx.exit(EXIT_BAD_INPUT)
    if output == "json":
        click.echo(json.dumps(as_json(planned), indent=2))
    else:
        click.echo(as_table(planned, explain), nl=False)
    failures = any(p.decision.error is not None for p in planned)
    ctx.exit(EXIT_PLACEMENT_ERROR if failures else EXIT_OK)


def _read(path: str) -> loader.Source:
    """The file's text; never reads more than one byte past the size limit."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(documents.LIMITS.max_bytes + 1)
    except OSError as error:
        raise loader.LoadError(path, "", f"cannot read: {error.strerror or error}") from None
    return loader.decode(path, data)


def _run(
    files: Sequence[str], clusters_file: str, previous_file: str | None, failed: Sequence[str]
) -> list[engine.Planned]:
    manifests = loader.parse_manifests([_read(f) for f in files])
    if not manifests.resources:
        raise loader.LoadError(", ".join(files), "", "no resources to place in these files")
    clusters = loader.parse_clusters(_read(clusters_file))
    unknown = sorted(set(failed) - {c.name for c in clusters})
    if unknown:
        raise loader.LoadError(
            "--fail", "", f"no cluster named {', '.join(unknown)} in {clusters_file}"
        )
    previous = loader.parse_previous(_read(previous_file)) if previous_file else {}
    fleet = clusters_.Fleet(clusters_.mark_failed(clusters, failed))
    return engine.plan(manifests.resources, manifests.policies, fleet, previous)


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
    width = shutil.get_terminal_size((120, 24)).columns
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
