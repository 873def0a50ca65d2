"""vela-core's Terraform workflow steps ``apply-terraform-config`` and
``apply-terraform-provider`` (vela-templates/definitions/internal/workflowstep/), as deploy
steps of the objects they write, in the Application's own namespace, to the local
cluster (where KubeVela writes them: its control plane; here ``--local-cluster``, as
``apply-object`` without ``cluster``). The member's terraform controller runs the module;
the step waits, as KubeVela's ``check`` does, for the Configuration's
``status.apply.state: Available`` (:func:`federation.applications.terraform.health`).

- ``apply-terraform-config``: a Configuration ``<app>-<step>`` of ``source`` (``hcl``, or
  ``remote`` (default KubeVela's terraform-modules repository) with ``path``),
  ``variable``, ``deleteResource`` (true), ``forceDelete`` (false),
  ``writeConnectionSecretToRef`` and ``providerRef`` (their namespace defaults to the
  Application's, and may only be it), ``region``. Where this differs: KubeVela writes
  ``region`` as ``spec.region`` and ``jobEnv`` as ``spec.jobEnv``, fields the v1beta2
  Configuration does not have (``customRegion``, ``JobEnv``), so the API server drops
  them; here ``region`` is ``customRegion``, what its usage says ("overrides the region of
  the Provider"), and ``jobEnv`` is refused (the environment of the job holding the
  Provider's credentials; a Terraform component refuses ``JobEnv`` too).
- ``apply-terraform-provider``: what the terraform addon's config template
  ``terraform-<type>`` writes through KubeVela's config store, written directly: a Secret
  ``<app>-<step>`` whose ``credentials`` key holds the provider's credentials in the
  template's lines, and a Provider ``name`` (default ``<type>-provider``) of ``region``
  whose ``credentials.secretRef`` is that Secret. Where this differs: the addon's
  templates put the Provider in ``default`` (the step then reads it in the Application's
  namespace, where it is not); here both objects are in the Application's namespace, so
  the Provider's credentials are the Application's own and a Provider of another
  namespace is never written or replaced. ``type: azure`` is taken with its four fields
  (vela-core's ``#AzureProvider`` lacks ``type``, so no azure parameter evaluates there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.applications import shapes, steps, terraform
from federation.applications.model import AppError, AppSpec, PolicySpec, Step

JSON = dict[str, Any]
STEP_TYPES = ("apply-terraform-config", "apply-terraform-provider")
DEFAULT_REMOTE = "https://github.com/kubevela-contrib/terraform-modules.git"
PROVIDER_API_VERSION = "terraform.core.oam.dev/v1beta1"
_REFERENCE = {"name": str, "namespace?": str}
CONFIG = {"source": {"hcl?": str, "remote?": str, "path?": str},
          "deleteResource": shapes.Default(bool, True),
          "variable": shapes.Default(shapes.OPEN_MAP, {}),
          "writeConnectionSecretToRef?": _REFERENCE, "providerRef?": _REFERENCE,
          "region?": str, "forceDelete": shapes.Default(bool, False)}
CONFIG_KEYS = frozenset({*(k.rstrip("?") for k in CONFIG), "jobEnv"})

_BASIC = ("accessKey", "secretKey", "region")
PROVIDERS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...], str | None]] = {
    "alibaba": (_BASIC, (("accessKeyID", "accessKey"), ("accessKeySecret", "secretKey")),
                "region"),
    "aws": ((*_BASIC, "token?"), (("awsAccessKeyID", "accessKey"),
                                  ("awsSecretAccessKey", "secretKey"),
                                  ("awsSessionToken", "token")), "region"),
    "azure": (("subscriptionID", "tenantID", "clientID", "clientSecret"),
              (("armClientID", "clientID"), ("armClientSecret", "clientSecret"),
               ("armSubscriptionID", "subscriptionID"), ("armTenantID", "tenantID")), None),
    "baidu": (_BASIC, (("accessKey", "accessKey"), ("secretKey", "secretKey")), "region"),
    "ec": (("apiKey?",), (("ecApiKey", "apiKey"),), None),
    "gcp": (("credentials", "region", "project"),
            (("gcpCredentialsJSON", "credentials"), ("gcpProject", "project")), "region"),
    "tencent": (("secretID", "secretKey", "region"),
                (("secretID", "secretID"), ("secretKey", "secretKey")), "region"),
    "ucloud": (("publicKey", "privateKey", "projectID", "region"),
               (("privateKey", "privateKey"), ("publicKey", "publicKey"),
                ("projectID", "projectID")), "region"),
}
"""Per ``type``: the parameters (``?``: optional, default ""), the lines of the
``credentials`` key (the addon template's ``<line key>: <parameter>``), and the parameter
that is the Provider's ``region``."""
PROVIDER_KEYS = frozenset({"type", "name"} | {p.rstrip("?") for params, _, _ in
                                             PROVIDERS.values() for p in params})


def deploy_step(step: Step, spec: AppSpec, app: str, namespace: str, where: str
                ) -> tuple[AppSpec, PolicySpec]:
    """The step as a deploy step: the spec of its one component (a ``k8s-objects`` of the
    objects it writes, named after the step), and its topology (the local cluster)."""
    made = objects(step.type, step.properties, app, step.name, namespace,
                   f"{where}.properties")
    component = steps.step_component(step, made, where, "the objects")
    topology = PolicySpec(name=where, type="topology",
                          properties={"clusters": [steps.LOCAL]})
    return spec.model_copy(update={"components": (component,)}), topology


def objects(step_type: str, props: Mapping[str, Any], app: str, step: str, namespace: str,
            where: str) -> list[JSON]:
    """The objects the step writes (``where``: its properties' path), named
    ``<app>-<step>`` as vela-core names them."""
    name = steps.object_name(f"{app}-{step}", f"{where} (the name <app>-<step>)")
    if step_type == "apply-terraform-config":
        return [configuration(props, name, namespace, where)]
    return provider(props, name, namespace, where)


def configuration(props: Mapping[str, Any], name: str, namespace: str, where: str) -> JSON:
    if "jobEnv" in props:
        raise AppError(f"{where}.jobEnv: not supported (KubeVela writes it as spec.jobEnv, "
                       "which the Configuration does not have; the environment of the job "
                       "holding the Provider's credentials is not the tenant's to set)")
    found = shapes.check(dict(props), CONFIG, where)
    spec: JSON = {"deleteResource": found["deleteResource"],
                  "variable": _variable(found["variable"], f"{where}.variable"),
                  "forceDelete": found["forceDelete"]}
    spec.update(_source(found["source"], f"{where}.source"))
    for key in ("providerRef", "writeConnectionSecretToRef"):
        if key in found:
            spec[key] = _own(found[key], namespace, f"{where}.{key}")
    if found.get("region"):
        spec["customRegion"] = found["region"]
    manifest = {"apiVersion": terraform.API_VERSION, "kind": terraform.KIND,
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    terraform.check_manifest(manifest, where)
    return manifest


def _variable(value: Any, where: str) -> JSON:
    if not isinstance(value, dict):
        raise AppError(f"{where}: must be a map")
    return dict(value)


def _source(source: Mapping[str, Any], where: str) -> JSON:
    """``{hcl}`` or ``{remote (default), path?}``, as the definition's closed disjunction."""
    if "hcl" in source:
        if set(source) != {"hcl"}:
            raise AppError(f"{where}: hcl, or remote with path, not both")
        if not source["hcl"].strip():
            raise AppError(f"{where}.hcl: must not be empty")
        return {"hcl": source["hcl"]}
    found: JSON = {"remote": source.get("remote") or DEFAULT_REMOTE}
    if source.get("path"):
        found["path"] = source["path"]
    return found


def _own(reference: Mapping[str, str], namespace: str, where: str) -> dict[str, str]:
    """A reference with the definition's default namespace (the Application's), which is
    the only one allowed: another namespace's Provider would run the module with that
    namespace's cloud credentials, another's connection Secret would be overwritten."""
    given = reference.get("namespace") or namespace
    if given != namespace:
        raise AppError(f"{where}.namespace: {given!r} is not the Application's namespace "
                       f"{namespace!r}: a Terraform step references its own namespace only")
    if not reference["name"]:
        raise AppError(f"{where}.name: must not be empty")
    return {"name": reference["name"], "namespace": namespace}


def provider(props: Mapping[str, Any], secret_name: str, namespace: str, where: str
             ) -> list[JSON]:
    """The credentials Secret and the Provider reading it, both in ``namespace``. Errors
    name a field, never a value (the values are credentials)."""
    kind = props.get("type")
    if kind not in PROVIDERS:
        raise AppError(f"{where}.type: required, one of {', '.join(PROVIDERS)}")
    params, lines, region = PROVIDERS[kind]
    shape: JSON = {"type": str, "name": shapes.Default(str, f"{kind}-provider")}
    for param in params:
        shape[param.rstrip("?")] = shapes.Default(str, "") if param.endswith("?") else str
    found = shapes.check(dict(props), shape, where)
    name = steps.object_name(found["name"], f"{where}.name")
    credentials = "\n".join(f"{line}: {found[param]}" for line, param in lines)
    labels = {"config.oam.dev/catalog": "velacore-config",
              "config.oam.dev/type": "terraform-provider",
              "config.oam.dev/provider": f"terraform-{kind}"}
    secret: JSON = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": secret_name, "namespace": namespace,
                                 "labels": dict(labels)},
                    "stringData": {"credentials": credentials}}
    spec: JSON = {"provider": kind}
    if region is not None:
        spec["region"] = found[region]
    spec["credentials"] = {"source": "Secret", "secretRef": {
        "namespace": namespace, "name": secret_name, "key": "credentials"}}
    made: JSON = {"apiVersion": PROVIDER_API_VERSION, "kind": "Provider",
                  "metadata": {"name": name, "namespace": namespace, "labels": labels},
                  "spec": spec}
    return [secret, made]
