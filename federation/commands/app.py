"""``fedctl app``: Applications from the command line.

``dry-run -f app.yaml`` renders and places offline (like ``fedctl plan``: no cluster,
no write; ``--clusters`` takes a ``fedctl plan`` cluster file). The file is untrusted input
read through the capped loader (:mod:`federation.untrusted.documents`: size, encoding,
depth, alias and document limits), and every problem with it is one line on stderr naming
the file, exit status 1, never a traceback. ``status``, ``revisions``
read the hub; ``resume``, ``restart`` and ``rollback`` write one annotation with a fresh
nonce on the Application (``federation.io/resume`` ...), which the controller acts on
once and records in ``status.handledRequests``: the request survives a control-plane
restart and is never applied twice.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any, NoReturn

import click
import yaml

from federation.applications import compile as compile_
from federation.applications import (
    config_store,
    cue_worker,
    custom_status,
    definition_files,
    definition_revisions,
    definitions,
    endpoints,
    export_service,
    helmchart,
    jdbc,
    model,
    pod_steps,
    refs,
    resource_policies,
    restarts,
    scope,
    workflow,
    workflow_ref,
)
from federation.commands.common import clear_errors, cluster_options
from federation.contexts import client as kube
from federation.contexts import egress, kubeconfig
from federation.controllers import applications
from federation.controllers.applications import charts
from federation.hub import api
from federation.local import helm
from federation.placement import clusters as clusters_
from federation.placement import loader
from federation.untrusted import documents

JSON = dict[str, Any]


@click.group("app")
def app() -> None:
    """KubeVela Applications: dry-run, status, revisions, resume, restart, rollback."""


@app.command("dry-run")
@click.option("-f", "--filename", "path", required=True, type=click.Path(path_type=Path),
              help="Application manifest (Policies in the same file are used as external, "
                   "and the Workflow its spec.workflow.ref names is taken from it).")
@click.option("--clusters", "clusters_file", type=click.Path(path_type=Path), default=None,
              help="A `fedctl plan --clusters` file (default: member1..member3, bare).")
@click.option("--local-cluster", default=None, help="What KubeVela's `local` names.")
@click.option("--definitions", "definition_paths", multiple=True,
              type=click.Path(path_type=Path),
              help="A file, or a directory of .yaml/.yml/.json/.cue files, of "
                   "ComponentDefinitions and TraitDefinitions, as objects or as KubeVela's "
                   "CUE definition files, as `vela def apply` and addons take them, and of "
                   "DefinitionRevisions (what `type: name@vN` names) "
                   "(repeatable; definitions in the -f file count too; one without a "
                   "namespace is taken as vela-system's).")
@click.option("--target-namespaces", default=None, metavar="NS[,NS...]",
              help="Member namespaces granted to the Application's namespace, as the "
                   f"hub Namespace's {scope.TARGETS_ANNOTATION} annotation would "
                   "(default: that annotation on a Namespace in the file, else none).")
@click.option("--helm", "helm_path", default=None, metavar="PATH",
              help="The Helm v3 binary helmchart components render with (default: "
                   "$FEDERATION_HELM, helm on PATH, then `fedctl local install-helm`'s).")
@click.option("--chart-allow", "chart_allow", multiple=True, metavar="CIDR",
              help="Networks charts may be fetched from although private or loopback, as "
                   "`fedctl run --chart-allow` (repeatable).")
@click.option("--export-service-allow", "export_allow", multiple=True, metavar="CIDR",
              help="Address ranges export-service steps may export, as `fedctl run "
                   "--export-service-allow` (repeatable; default none).")
def dry_run(path: Path, clusters_file: Path | None, local_cluster: str | None,
            definition_paths: tuple[Path, ...], target_namespaces: str | None,
            helm_path: str | None, chart_allow: tuple[str, ...],
            export_allow: tuple[str, ...]) -> None:
    """Render the Application and place each deploy step, offline; print the manifests.
    A helmchart component's chart is fetched (the only network use), under the outbound
    policy `fedctl run` applies."""
    docs = _documents(path)
    application, external = _application(path, docs)
    user = _user_types(application, docs, definition_paths,
                       _evaluate(_chart_settings(helm_path, chart_allow)))
    fleet = [clusters_.Cluster(name=n) for n in ("member1", "member2", "member3")]
    if clusters_file is not None:
        try:
            fleet = list(loader.parse_clusters(loader.decode(
                str(clusters_file), _read(clusters_file))))
        except loader.LoadError as exc:
            _fail(str(exc))
    meta = application.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    written = application.get("spec") or {}
    try:
        grant, source = _dry_run_grant(namespace, target_namespaces, docs)
        # What the grant was taken from (a comment line before any error): the offline
        # answer is only as good as that.
        click.echo(f"# namespaces: {loader.one_line(grant.describe())}, from "
                   f"{loader.one_line(source)}", err=True)
        spec = workflow_ref.from_documents(written, namespace, docs)
        spec = refs.from_documents(spec, namespace, docs)
        spec = _chart_values(spec, namespace, docs)
        spec = definition_revisions.resolve(user.catalog, spec, meta.get("annotations"))
        compiled = compile_.compile_app(spec, str(meta["name"]), namespace, external, fleet,
                                        local_cluster, grant, user,
                                        export_allow=_export_allow(export_allow))
        restarts.request(meta.get("annotations"), [s.type for s in compiled.steps])
    except model.AppError as exc:
        _fail(f"{path}: {workflow_ref.located(exc, written, namespace)}")
    _print(compiled)


def _export_allow(texts: tuple[str, ...]) -> export_service.Allow:
    try:
        return export_service.Allow.parse(texts)
    except ValueError as exc:
        _fail(str(exc))


def _chart_values(spec: Any, namespace: str, docs: list[Any]) -> Any:
    """``spec`` with its helmchart components' ``valuesFrom`` read from the file's
    ConfigMaps in the Application's namespace (they stand for the hub's)."""
    wanted = helmchart.values_refs(spec, namespace)
    if not wanted:
        return spec
    maps = {str((d.get("metadata") or {}).get("name")): d for d in docs
            if isinstance(d, dict) and d.get("kind") == "ConfigMap" and
            str((d.get("metadata") or {}).get("namespace") or namespace) == namespace}
    read = {index: [_text((maps.get(ref.name) or {}).get("data"), ref.key) for ref in found]
            for index, found in wanted.items()}
    return helmchart.with_values(spec, read, wanted, namespace)


def _text(data: Any, key: str) -> str | None:
    value = data.get(key) if isinstance(data, dict) else None
    return str(value) if value is not None else None


def _chart_settings(helm_path: str | None, chart_allow: tuple[str, ...]
                    ) -> charts.ChartSettings:
    found = helm.find(helm_path)
    if helm_path and found is None:
        _fail(f"--helm: {helm_path!r} is not an executable file")
    try:
        policy = egress.EgressPolicy(egress.parse_networks(chart_allow))
    except ValueError as exc:
        _fail(f"--chart-allow: {exc}")
    return charts.ChartSettings(policy=policy, helm=found)


def _evaluate(settings: charts.ChartSettings) -> definitions.Evaluate:
    """CUE evaluations in process; Helm renders fetched under ``settings``' policy and run
    as a limited child process (the CLI waits: nothing else runs here)."""
    renderer = charts.Renderer(settings, charts.inline_render)

    def evaluate(request: JSON) -> JSON:
        if helmchart.REQUEST_KEY in request:
            return asyncio.run(renderer(request))
        return cue_worker.inline(request)
    return evaluate


def _user_types(application: JSON, docs: list[Any], paths: tuple[Path, ...],
                evaluate: definitions.Evaluate) -> definitions.Rendering:
    """The definitions of the -f file and of ``--definitions``, evaluated in this process
    (each evaluation within the CUE budget)."""
    found = [d for d in docs if _is_definition(d)]
    for given in paths:
        files = sorted(p for p in given.iterdir()
                       if p.suffix in (".yaml", ".yml", ".json", ".cue")) \
            if given.is_dir() else [given]
        for file in files:
            found += [_cue_definition(file)] if file.suffix == ".cue" else \
                [d for d in _documents(file) if _is_definition(d)]
    for doc in found:
        meta = doc.get("metadata")
        if isinstance(meta, dict) and not meta.get("namespace"):
            doc["metadata"] = {**meta, "namespace": definitions.SYSTEM_NAMESPACES[0]}
    revisions = [d for d in found if d.get("kind") == definition_revisions.KIND]
    catalog, _ = definitions.catalog([d for d in found if d.get("kind") in definitions.KINDS])
    catalog = definition_revisions.with_revisions(catalog, revisions)
    meta = application.get("metadata") or {}
    spec = application.get("spec")
    components = spec.get("components") if isinstance(spec, dict) else None
    info = definitions.AppInfo(str(meta.get("name") or ""), 1,
                               _strings(meta.get("labels")), _strings(meta.get("annotations")),
                               tuple(c for c in components or [] if isinstance(c, dict))
                               if isinstance(components, list) else ())
    return definitions.Rendering(catalog, info, evaluate)


def _cue_definition(path: Path) -> JSON:
    """A CUE definition file as the object ``vela def apply`` would install."""
    try:
        text = documents.decode(_read(path))
        return definition_files.from_cue_file(text, str(path))
    except documents.TextError as exc:
        _fail(f"{path}: {exc}")
    except definitions.DefinitionError as exc:
        _fail(str(exc))


def _is_definition(doc: Any) -> bool:
    """A definition, or a DefinitionRevision (what ``type: name@vN`` names)."""
    return isinstance(doc, dict) and \
        str(doc.get("kind")) in (*definitions.KINDS, definition_revisions.KIND)


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _fail(message: str) -> NoReturn:
    """One line on stderr (control characters from the input escaped), exit status 1."""
    click.echo(f"error: {loader.one_line(message)}", err=True)
    sys.exit(1)


def _read(path: Path) -> bytes:
    """At most one byte more than the loader's size limit (a 50 MB file, a FIFO or
    /dev/zero is refused by size without being read whole)."""
    try:
        with path.open("rb") as stream:
            return stream.read(documents.LIMITS.max_bytes + 1)
    except OSError as exc:
        _fail(f"{path}: cannot read: {exc.strerror or exc}")


def _documents(path: Path) -> list[Any]:
    """The file's YAML documents, through the capped loader."""
    try:
        return documents.yaml_documents(documents.decode(_read(path)))
    except documents.TextError as exc:
        _fail(f"{path}: {exc}")


def _application(path: Path, docs: list[Any]) -> tuple[JSON, dict[str, JSON]]:
    """The one Application of the file and its Policies by name, each named (a document
    without a usable ``metadata.name`` is refused, naming it, not skipped)."""
    apps: list[JSON] = []
    external: dict[str, JSON] = {}
    for number, doc in enumerate(docs, start=1):
        if not isinstance(doc, dict) or doc.get("kind") not in ("Application", "Policy"):
            continue
        meta = doc.get("metadata")
        where = f"{path}: {doc['kind']} (document {number})"
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or \
                not meta["name"]:
            _fail(f"{where}: metadata.name: required")
        name = str(meta["name"])
        if not isinstance(meta.get("namespace", ""), str):
            _fail(f"{where}: metadata.namespace: a string")
        if doc["kind"] == "Application":
            apps.append(doc)
        elif name in external:
            _fail(f"{where}: a second Policy named {name!r}")
        else:
            external[name] = doc
    if len(apps) != 1:
        _fail(f"{path}: expected one Application, found {len(apps)}")
    return apps[0], external


def _print(compiled: compile_.Compiled) -> None:
    for step in compiled.steps:
        line = f"# step {step.name} ({step.type})"
        if step.group:
            line = f"# step {step.group} / sub-step {step.name} ({step.type})"
        if step.unrendered:
            line += ": rendered once its inputs are known"
        line += _what_it_does(compiled, step)
        target = compiled.targets.get(step.name)
        if target is not None:
            line += f": {', '.join(step.targets) or 'no cluster'} " \
                    f"(parallelism {step.parallelism})"
        click.echo(line)
        for checks in target.checks if target else ():
            click.echo(f"#   component {checks.component}: "
                       f"{', '.join(sorted({c.ref for c in checks.checks}))}: "
                       f"{custom_status.NO_LIVE_OBJECTS}")
        for replicas in target.replicas if target else ():
            click.echo(f"#   {replicas}")
        for topology in target.empty if target else ():
            click.echo(f"#   topology {topology}: allowEmpty, its selection matches no member "
                       "cluster; nothing placed")
        for cluster, objects in (target.clusters.items() if target else ()):
            for obj in objects:
                click.echo(f"---\n# cluster: {cluster}")
                kept = _gc_words(compiled, obj)
                if kept:
                    click.echo(f"# garbage-collect: {kept}")
                rule = compiled.resource_update.rule(obj)
                if rule is not None and rule.recreate_fields:
                    click.echo("# resource-update: deleted and created again when "
                               f"{', '.join(rule.recreate_fields)} differs in the member")
                if compiled.take_over.match(obj):
                    kept = "; given by its metadata only, the member's content is kept" \
                        if resource_policies.bare(obj) else ""
                    click.echo("# take-over: adopted if the member holds it and no one "
                               f"placed it{kept}")
                click.echo(yaml.safe_dump(obj, sort_keys=False).rstrip())


def _gc_words(compiled: compile_.Compiled, obj: JSON) -> str:
    """What the garbage-collect policy's rules do to ``obj`` ("" for the default)."""
    strategy, propagation = compiled.gc.strategy(obj)
    left = "left in the member, untracked (its dependents too)"
    if strategy == "never":
        return "never deleted: " + left + " once no longer rendered or when the " \
            "Application is deleted"
    if strategy == "onAppDelete":
        then = f"{left} when the Application is deleted" if propagation == "orphan" \
            else "deleted with the Application"
        return f"kept when no longer rendered; {then}"
    if propagation == "orphan":
        return f"{left} instead of deleted, once no longer rendered or when the " \
            "Application is deleted"
    if propagation == "cascading":
        return "deleted once no longer rendered, in the background (its dependents after it)"
    return ""


TERRAFORM_WORDS = {
    "apply-terraform-config": ": writes a Configuration for the member's terraform controller "
                              "to run; the step waits until it reports the apply Available",
    "apply-terraform-provider": ": writes a terraform Provider and the Secret of its "
                                "credentials, both in the Application's namespace",
    "deploy-cloud-resource": ": writes the env's Configurations as <component>-<env> to the "
                             "local cluster, then copies each connection Secret (shown "
                             "empty: its data is read when the step runs, where the hub "
                             "namespace has the Secret grant)",
    "share-cloud-resource": ": copies the env's connection Secrets (shown empty: their data "
                            "is read when the step runs, where the hub namespace has the "
                            "Secret grant)",
}


def _what_it_does(compiled: compile_.Compiled, step: workflow.StepSpec) -> str:
    """What a step that reads, waits or deletes does, for its line (deploy steps print
    their objects instead)."""
    read = compiled.reads.get(step.name)
    if read is not None:
        return f": reads {read.kind} {read.name} ({read.api_version}) in the " \
               f"Application's namespace on {read.cluster or 'the hub'}"
    selector = compiled.cleans.get(step.name)
    if selector is not None:
        labels = ", ".join(f"{k}={v}" for k, v in selector.items()) or "any labels"
        return ": deletes this Application's own Jobs (their pods with them) and Pods " \
               f"labelled {labels} in its namespace, where earlier steps put them"
    awaited = compiled.awaits.get(step.name)
    if awaited is not None:
        return f": waits for Application {awaited} of this namespace to be running " \
               f"(created from ConfigMap {awaited} of this namespace if it is missing)"
    stored = compiled.stores.get(step.name)
    if stored is not None:
        return config_store.describe(stored)
    chosen = compiled.collects.get(step.name)
    if chosen is not None:
        return ": waits for an endpoint of the Application's own Services and Ingresses " \
               f"in the clusters its steps deploy to ({_filters(chosen)})"
    if step.type in TERRAFORM_WORDS and not step.unrendered:
        return TERRAFORM_WORDS[step.type]
    if step.type in pod_steps.WORDS and not step.unrendered:
        return pod_steps.WORDS[step.type]
    if step.type == "print-message-in-status" and not step.unrendered:
        return f": its status message will be {json.dumps(step.message)}"
    if step.type == jdbc.STEP_TYPE and step.template:
        secret = step.template["env"][0]["valueFrom"]["secretKeyRef"]["name"]
        return f": its output env references the keys of Secret {secret} (secretKeyRef), " \
               "which the kubelet resolves in the member; nothing is read"
    return ""


def _filters(chosen: endpoints.Collect) -> str:
    said = [f"components {', '.join(chosen.components)}" if chosen.components is not None
            else "every component"]
    said += [f"port {chosen.port}"] if chosen.port is not None else []
    said += [f"port name {chosen.port_name}"] if chosen.port_name is not None else []
    said += ["outer only"] if chosen.outer else []
    return "; ".join(said)


def _dry_run_grant(namespace: str, flag: str | None, docs: list[Any]
                   ) -> tuple[scope.Grant, str]:
    """The namespace grant dry-run assumes, and where it came from."""
    if flag is not None:
        return scope.Grant(namespace, scope.parse_targets(flag, "--target-namespaces")), \
            "--target-namespaces"
    for doc in docs:
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if not isinstance(meta, dict):
            continue
        if doc.get("kind") == "Namespace" and meta.get("name") == namespace:
            return scope.grant_of(namespace, meta.get("annotations")), \
                f"Namespace {namespace} in the file"
    return scope.Grant(namespace), "nothing (no --target-namespaces, no Namespace " \
        f"{namespace} in the file; the hub's annotation may grant more)"


def _client(kubeconfig_path: Path | None, hub_context: str | None) -> kube.ClusterClient:
    return kube.ClusterClient(kubeconfig.load(kubeconfig_path).context(hub_context))


async def _get(client: kube.ClusterClient, name: str, namespace: str) -> JSON:
    try:
        return await client.get(api.APPLICATIONS, name, namespace)
    finally:
        await client.close()


async def _annotate(client: kube.ClusterClient, name: str, namespace: str, key: str,
                    value: str) -> None:
    try:
        await client.patch(api.APPLICATIONS, name,
                           {"metadata": {"annotations": {key: value}}}, namespace=namespace)
    finally:
        await client.close()


def _request(kubeconfig_path: Path | None, hub_context: str | None, name: str,
             namespace: str, key: str, value: str) -> None:
    asyncio.run(_annotate(_client(kubeconfig_path, hub_context), name, namespace, key, value))


@app.command()
@cluster_options
@click.argument("name")
@click.option("-n", "--namespace", default="default")
@clear_errors
def resume(kubeconfig_path: Path | None, hub_context: str | None, name: str,
           namespace: str) -> None:
    """Resume a suspended workflow (a suspend or approve step)."""
    _request(kubeconfig_path, hub_context, name, namespace, applications.RESUME,
             uuid.uuid4().hex[:8])
    click.echo(f"application {namespace}/{name}: resume requested")


@app.command()
@cluster_options
@click.argument("name")
@click.option("-n", "--namespace", default="default")
@clear_errors
def restart(kubeconfig_path: Path | None, hub_context: str | None, name: str,
            namespace: str) -> None:
    """Run the current revision's workflow again from its first step."""
    _request(kubeconfig_path, hub_context, name, namespace, applications.RESTART,
             uuid.uuid4().hex[:8])
    click.echo(f"application {namespace}/{name}: restart requested")


@app.command()
@cluster_options
@click.argument("name")
@click.option("-n", "--namespace", default="default")
@click.option("--revision", type=int, default=None,
              help="Revision number to return to (default: the last that succeeded).")
@clear_errors
def rollback(kubeconfig_path: Path | None, hub_context: str | None, name: str,
             namespace: str, revision: int | None) -> None:
    """Put every cluster back on an earlier revision (until the Application changes)."""
    _request(kubeconfig_path, hub_context, name, namespace, applications.ROLLBACK,
             f"{revision or 0}@{uuid.uuid4().hex[:8]}")
    click.echo(f"application {namespace}/{name}: rollback to "
               f"{'revision ' + str(revision) if revision else 'the last good revision'} "
               "requested")


@app.command()
@cluster_options
@click.argument("name")
@click.option("-n", "--namespace", default="default")
@clear_errors
def revisions(kubeconfig_path: Path | None, hub_context: str | None, name: str,
              namespace: str) -> None:
    """List the Application's revisions."""
    async def read() -> JSON:
        client = _client(kubeconfig_path, hub_context)
        try:
            return await client.list(api.APPLICATION_REVISIONS, namespace,
                                     labelSelector=f"app.oam.dev/name={name}")
        finally:
            await client.close()

    items = sorted(asyncio.run(read()).get("items", []),
                   key=lambda r: int(r["spec"]["revision"]))
    click.echo(f"{'REVISION':<10}{'NAME':<30}{'HASH':<18}SUCCEEDED")
    for rev in items:
        succeeded = (rev.get("status") or {}).get("succeeded")
        click.echo(f"{rev['spec']['revision']:<10}{rev['metadata']['name']:<30}"
                   f"{rev['spec']['revisionHash']:<18}"
                   f"{'' if succeeded is None else str(succeeded).lower()}")


@app.command()
@cluster_options
@click.argument("name")
@click.option("-n", "--namespace", default="default")
@click.option("-o", "--output", type=click.Choice(["tree", "json"]), default="tree")
@clear_errors
def status(kubeconfig_path: Path | None, hub_context: str | None, name: str,
           namespace: str, output: str) -> None:
    """The Application as a tree: revision, steps, clusters, resources, health."""
    found = asyncio.run(_get(_client(kubeconfig_path, hub_context), name, namespace))
    current = found.get("status") or {}
    if output == "json":
        click.echo(json.dumps(current, indent=2))
        return
    click.echo(tree(name, current))


def _step_lines(step: JSON, health: dict[tuple[str, str], JSON], indent: str) -> list[str]:
    lines = [f"{indent}├─ {step['name']} ({step['type']}): {step['phase']}"
             f"{'  ' + step['reason'] if step.get('reason') else ''}"
             f"{'  ' + step['message'] if step.get('message') else ''}",
             f"{indent}│    first {step.get('firstExecuteTime') or '-'}  "
             f"finished {step.get('finishedTime') or '-'}"]
    for cluster in step.get("clusters") or []:
        seen = health.get((step["name"], cluster)) or {}
        mark = "healthy" if seen.get("healthy") else seen.get("message") or "waiting"
        lines.append(f"{indent}│    └─ {cluster}: {mark}")
    return lines


def _component_lines(service: JSON) -> list[str]:
    """A component whose definitions have a status: healthy, message, its traits'."""
    state = "healthy" if service.get("healthy") else "unhealthy"
    lines = [f"├─ component {service.get('name')} in {service.get('cluster')} "
             f"({service.get('step')}): {state}"
             + (f": {loader.one_line(str(service['message']))}"
                if service.get("message") else "")]
    for trait in service.get("traits") or []:
        state = "healthy" if trait.get("healthy") else "unhealthy"
        lines.append(f"│  └─ trait {trait.get('type')}: {state}"
                     + (f": {loader.one_line(str(trait['message']))}"
                        if trait.get("message") else ""))
    return lines


def tree(name: str, current: JSON) -> str:
    latest = current.get("latestRevision") or {}
    lines = [f"{name}  phase={current.get('status', 'unknown')}  "
             f"revision={latest.get('name', '-')}  healthy={current.get('healthy')}"]
    if current.get("rollback"):
        lines.append(f"├─ rolled back to revision {current['rollback']['revision']}")
    if current.get("status") == "renderFailed":  # why, as the Rendered condition says
        lines += [f"├─ not rendered: {loader.one_line(str(c.get('message')))}"
                  for c in current.get("conditions") or []
                  if isinstance(c, dict) and c.get("type") == "Rendered"]
    flow = current.get("workflow") or {}
    lines.append(f"├─ workflow {flow.get('phase', '-')}  started {flow.get('startTime')}"
                 f"  ended {flow.get('endTime') or '-'}")
    services = current.get("services") or []
    health = {(s["step"], s["cluster"]): s for s in services if "name" not in s}
    for step in flow.get("steps") or []:
        lines.extend(_step_lines(step, health, "│  "))
        for sub in step.get("subStepsStatus") or []:
            lines.extend(_step_lines(sub, health, "│  │    "))
    for service in (s for s in services if "name" in s):
        lines.extend(_component_lines(service))
    resources = current.get("appliedResources") or []
    lines.append(f"└─ resources ({len(resources)})")
    for entry in resources:
        where = f"{entry['namespace']}/" if entry.get("namespace") else ""
        lines.append(f"   └─ {entry['cluster']}: {entry['kind']} {where}{entry['name']} "
                     f"(v{entry['revision']})")
    return "\n".join(lines)
