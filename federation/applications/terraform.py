"""KubeVela's Terraform components: a ComponentDefinition with ``spec.schematic.terraform``
renders one terraform-controller ``Configuration``, pure.

What vela-core does (``generateTerraformConfigurationWorkload``, pkg/appfile): the
component becomes a ``terraform.core.oam.dev/v1beta2`` Configuration named after the
component in its target namespace, annotated with the definition's annotations; the
definition's module is ``spec.hcl`` (``type: hcl``, the default) or ``spec.remote`` with
``spec.path`` (``type: remote``); the properties are unmarshalled into the spec (so a
property named like a spec field sets it) and all of them but five reserved keys
(``writeConnectionSecretToRef``, ``customRegion``, ``providerRef``, ``forceDelete``,
``gitCredentialsSecretReference``) are ``spec.variable``; the definition's
``writeConnectionSecretToRef``, ``providerRef`` and ``gitCredentialsSecretReference``
fill what the properties leave out, and a connection Secret without a namespace gets the
component's. The member's terraform controller runs it (this control plane runs no
Terraform, parses no HCL and fetches nothing): it delivers the object like any other.

Where this differs, each time to refuse by name what KubeVela takes and drops or lets
reach another namespace:

- a property naming another namespace in a reference (the connection Secret written, the
  Provider whose credentials run the module, a Secret or ConfigMap read for git or the
  registry) is refused: KubeVela's own test lets ``providerRef.namespace: default2``
  through, which would run the module with another namespace's cloud credentials. A
  ``providerRef`` without a namespace is the terraform controller's ``default``
  namespace, so it must be the component's (or the component be in ``default``). The
  definition's references are the administrator's and are kept as written;
- properties KubeVela overwrites or that would change what runs (``hcl``, ``remote``,
  ``path``, ``gitRef``, ``backend``, ``JobEnv``) are refused: the module is the
  definition's; a key spelt like a spec field in other letter case (Go's unmarshal
  matches it, KubeVela's reserved-key filter does not) is refused too;
- a definition's ``type: json`` (KubeVela renders neither source for it), ``path`` with
  ``type: hcl``, ``deleteResource: false`` and ``customRegion`` (vela-core reads neither
  from the definition) are refused when the definition is loaded.

Health (:func:`health`) is KubeVela's ``setStatus``: healthy when the terraform controller
has observed the current generation and ``status.apply.state`` is ``Available``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from federation.applications import fields
from federation.applications.model import AppError

JSON = dict[str, Any]

API_VERSION = "terraform.core.oam.dev/v1beta2"
GROUP = "terraform.core.oam.dev"
KIND = "Configuration"
PROVIDER_DEFAULT_NAMESPACE = "default"
"""Where the terraform controller looks for a ``providerRef`` without a namespace (the
CRD's default), and for the Provider ``default`` when there is no ``providerRef``."""

RESERVED = ("writeConnectionSecretToRef", "customRegion", "providerRef", "forceDelete",
            "gitCredentialsSecretReference")
"""The properties vela-core takes out of ``spec.variable``."""
_REFERENCES = ("writeConnectionSecretToRef", "providerRef", "gitCredentialsSecretReference",
               "terraformCredentialsSecretReference", "terraformRCConfigMapReference",
               "terraformCredentialsHelperConfigMapReference")
_BOOLEANS = ("deleteResource", "forceDelete", "inlineCredentials")
_REFUSED = {
    "hcl": "the module is the definition's",
    "remote": "the module is the definition's",
    "path": "the module is the definition's",
    "gitRef": "the module's revision is the definition's",
    "backend": "a backend can keep the state in another namespace or anywhere its HCL says",
    "JobEnv": "the environment of the job that runs the module with the provider's "
              "credentials is not the tenant's to set",
}
SPEC_FIELDS = frozenset({*_REFERENCES, *_BOOLEANS, *_REFUSED, "customRegion", "variable"})
"""The ConfigurationSpec fields a property can set (terraform-controller api/v1beta2)."""
_SPEC_LOWER = {name.lower(): name for name in SPEC_FIELDS}
_DEFINITION_FIELDS = frozenset({"configuration", "type", "path", "writeConnectionSecretToRef",
                                "providerRef", "gitCredentialsSecretReference",
                                "deleteResource", "customRegion"})


class ModuleError(ValueError):
    """A definition's ``spec.schematic.terraform`` that cannot be honoured."""


@dataclasses.dataclass(frozen=True)
class Module:
    """A definition's ``spec.schematic.terraform``, as the administrator wrote it."""

    configuration: str
    source: str
    """``hcl`` (``configuration`` is the HCL) or ``remote`` (a git URL)."""
    path: str = ""
    references: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """``writeConnectionSecretToRef``, ``providerRef``, ``gitCredentialsSecretReference``
    given by the definition."""


def module_of(schematic: Mapping[str, Any], where: str) -> Module:
    """The module of ``spec.schematic.terraform`` (:class:`ModuleError` naming the field)."""
    here = f"{where}: spec.schematic.terraform"
    for key in schematic:
        if key not in _DEFINITION_FIELDS:
            raise ModuleError(f"{here}.{key}: not supported")
    text = schematic.get("configuration")
    if not isinstance(text, str) or not text.strip():
        raise ModuleError(f"{here}.configuration: required (the HCL, or a git URL with "
                          "type remote)")
    source = schematic.get("type", "hcl")
    if source not in ("hcl", "remote"):
        raise ModuleError(f"{here}.type: hcl or remote (KubeVela renders no module for "
                          f"{source!r})")
    path = schematic.get("path", "")
    if not isinstance(path, str) or (path and source != "remote"):
        raise ModuleError(f"{here}.path: a string, with type remote only")
    if schematic.get("deleteResource", True) is not True:
        raise ModuleError(f"{here}.deleteResource: vela-core does not render it from the "
                          "definition; the properties of a component set it")
    if schematic.get("customRegion") not in (None, ""):
        raise ModuleError(f"{here}.customRegion: vela-core does not render it from the "
                          "definition; the properties of a component set it")
    references: dict[str, Mapping[str, str]] = {}
    for key in ("writeConnectionSecretToRef", "providerRef", "gitCredentialsSecretReference"):
        if schematic.get(key) is not None:
            references[key] = _reference_value(schematic[key], f"{here}.{key}", ModuleError)
    return Module(text, str(source), path, references)


def _reference_value(value: Any, where: str, error: type[Exception]) -> dict[str, str]:
    if not isinstance(value, dict) or set(value) - {"name", "namespace"}:
        raise error(f"{where}: a map of name and namespace")
    found = {}
    for key in ("name", "namespace"):
        item = value.get(key)
        if item is not None and (not isinstance(item, str) or not item):
            raise error(f"{where}.{key}: must be a non-empty string")
        if item:
            found[key] = item
    if "name" not in found:
        raise error(f"{where}.name: required")
    return found


def render(module: Module, annotations: Mapping[str, str], name: str,
           properties: Mapping[str, Any], namespace: str, where: str) -> JSON:
    """The Configuration of one component (``where``: the component's path)."""
    here = f"{where}.properties"
    spec: JSON = {}
    for key, value in properties.items():
        _check_property(key, value, spec, namespace, f"{here}.{key}")
    for key, reference in module.references.items():
        spec.setdefault(key, dict(reference))
    secret = spec.get("writeConnectionSecretToRef")
    if secret is not None and "namespace" not in secret:
        spec["writeConnectionSecretToRef"] = {**secret, "namespace": namespace}
    if module.source == "hcl":
        spec["hcl"] = module.configuration
    else:
        spec["remote"] = module.configuration
        if module.path:
            spec["path"] = module.path
    spec["variable"] = {k: copy.deepcopy(v) for k, v in properties.items() if k not in RESERVED}
    meta: JSON = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def _check_property(key: str, value: Any, spec: JSON, namespace: str, where: str) -> None:
    """One property: a spec field it sets (checked), or only a variable."""
    field = _SPEC_LOWER.get(key.lower())
    if field is None or key == "variable":
        return
    if field != key:
        raise AppError(f"{where}: spelt like the Configuration field {field!r}, which "
                       "vela-core sets from it without taking it out of the variables; "
                       f"write {field!r} or another name")
    if key in _REFUSED:
        raise AppError(f"{where}: not supported for a Terraform component ({_REFUSED[key]})")
    if key in _BOOLEANS:
        spec[key] = fields.boolean(value, where)
    elif key == "customRegion":
        if not isinstance(value, str):
            raise AppError(f"{where}: must be a string")
        if value:
            spec[key] = value
    else:
        spec[key] = _tenant_reference(key, value, namespace, where)


def _tenant_reference(key: str, value: Any, namespace: str, where: str) -> dict[str, str]:
    """A reference a property makes: only into the component's own namespace."""
    reference = _reference_value(value, where, AppError)
    given = reference.get("namespace")
    if key == "writeConnectionSecretToRef":
        effective = given or namespace  # vela-core fills the component's namespace
    elif key == "providerRef":
        effective = given or PROVIDER_DEFAULT_NAMESPACE
    elif given is None:
        raise AppError(f"{where}.namespace: required, the component namespace "
                       f"{namespace!r} (the terraform controller does not default it)")
    else:
        effective = given
    if effective != namespace:
        what = "namespace" if given else "namespace (by default, as the terraform " \
            "controller reads it)"
        raise AppError(f"{where}.{what}: {effective!r} is not the component namespace "
                       f"{namespace!r}: the properties of a Terraform component reference "
                       "objects of its own namespace only")
    return reference


def check_manifest(obj: Mapping[str, Any], where: str) -> None:
    """A Configuration a tenant wrote as a manifest (``k8s-objects``, ``raw``,
    ``ref-objects``): its references too stay in its own namespace, read as the terraform
    controller reads them (a connection Secret or ``providerRef`` without a namespace is
    in ``default``; the git and registry references need one), and a backend keeping the
    state elsewhere (``kubernetes.namespace``, or ``inline`` HCL) is refused."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    here = f"{where}: Configuration {(obj.get('metadata') or {}).get('name')} spec"
    for key in _REFERENCES:
        if spec.get(key) is None:
            continue
        reference = _reference_value(spec[key], f"{here}.{key}", AppError)
        given = reference.get("namespace")
        if given is None and key not in ("writeConnectionSecretToRef", "providerRef"):
            raise AppError(f"{here}.{key}.namespace: required, the namespace of the "
                           "Configuration (the terraform controller does not default it)")
        effective = given or PROVIDER_DEFAULT_NAMESPACE
        if effective != namespace:
            raise AppError(f"{here}.{key}.namespace: {effective!r} is not the namespace of "
                           f"the Configuration {namespace!r}: a tenant's Configuration "
                           "references objects of its own namespace only")
    backend = spec.get("backend")
    if isinstance(backend, dict):
        kube = backend.get("kubernetes")
        elsewhere = isinstance(kube, dict) and kube.get("namespace") not in (None, namespace)
        if backend.get("inline") or elsewhere:
            raise AppError(f"{here}.backend: keeps the state outside the namespace of the "
                           "Configuration (inline, or kubernetes.namespace)")


PROVIDER_KIND = "Provider"
_PROVIDER_SOURCES = ("Secret", "None")


def check_provider_manifest(obj: Mapping[str, Any], where: str) -> None:
    """A Provider a tenant writes (a manifest, or ``apply-terraform-provider``): the
    terraform controller reads its ``credentials.secretRef`` wherever it points and hands
    the Secret to every module run with the Provider, so the Secret must be in the
    Provider's own namespace; and its credentials must come from that Secret (or be
    ``None``): ``InjectedIdentity``, ``Environment`` and ``Filesystem`` are the terraform
    controller's own identity and files, the member administrator's credentials. Nor may
    it be the controller's default Provider (``default/default``)."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    if meta.get("name") == PROVIDER_DEFAULT_NAMESPACE == namespace:
        raise AppError(f"{where}: Provider default/default is the terraform controller's "
                       "default, which every Configuration without providerRef in the "
                       "member uses (another namespace's modules would run with this "
                       "Application's account); name it otherwise")
    spec = obj.get("spec")
    here = f"{where}: Provider {meta.get('name')} spec.credentials"
    credentials = spec.get("credentials") if isinstance(spec, dict) else None
    if not isinstance(credentials, dict):
        return  # the Provider CRD requires it: the member refuses the object
    source = credentials.get("source")
    if source not in _PROVIDER_SOURCES:
        raise AppError(f"{here}.source: {str(source)[:32]!r} is not supported (Secret or "
                       "None: the other sources are the terraform controller's own "
                       "credentials)")
    ref = credentials.get("secretRef")
    if ref is None:
        return
    if not isinstance(ref, dict):
        raise AppError(f"{here}.secretRef: must be a map of name, namespace and key")
    given = ref.get("namespace")
    if given is None:
        raise AppError(f"{here}.secretRef.namespace: required, the namespace of the "
                       f"Provider {namespace!r}")
    if given != namespace:
        raise AppError(f"{here}.secretRef.namespace: {str(given)[:64]!r} is not the namespace "
                       f"of the Provider {namespace!r}: a tenant's Provider reads its own "
                       "namespace's Secret only")


def is_provider(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == PROVIDER_KIND and \
        str(obj.get("apiVersion") or "").rpartition("/")[0] == GROUP


def is_configuration(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == KIND and \
        str(obj.get("apiVersion") or "").rpartition("/")[0] == GROUP


def health(what: str, live: Mapping[str, Any]
           ) -> tuple[Literal["healthy", "progressing"], str]:
    """KubeVela's ``setStatus`` for a Terraform component: (``healthy`` | ``progressing``,
    message). The controller's own ``status.apply.message`` is not copied (Terraform's
    output can quote variable values, which stay out of the hub's status): the state is."""
    status = live.get("status") or {}
    observed = int(status.get("observedGeneration") or 0)
    generation = int((live.get("metadata") or {}).get("generation") or 0)
    if observed and observed != generation:
        return "progressing", f"{what}: generation not observed yet"
    apply = status.get("apply") or {}
    state = apply.get("state") if isinstance(apply, dict) else None
    if state == "Available":
        return "healthy", ""
    return "progressing", f"{what}: state {str(state or 'not reported')[:64]}"


def provider_health(what: str, live: Mapping[str, Any]
                    ) -> tuple[Literal["healthy", "progressing"], str]:
    """vela-core's ``apply-terraform-provider`` check: a Provider is ready once the
    terraform controller reports ``status.state: ready`` (it has read the credentials
    Secret). Its message is not copied (it can quote the Secret's content)."""
    status = live.get("status") or {}
    state = status.get("state") if isinstance(status, dict) else None
    if state == "ready":
        return "healthy", ""
    return "progressing", f"{what}: state {str(state or 'not reported')[:64]}"


OWNED_BY = "terraform.core.oam.dev/owned-by"
OWNED_NAMESPACE = "terraform.core.oam.dev/owned-namespace"
"""The labels the terraform controller puts on a connection Secret it creates: the
Configuration's name and namespace (controllers/process/process.go, 2025-07)."""


def connection_secret(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the connection Secret a Configuration makes its terraform
    controller write, as the controller reads it (no namespace: ``default``), or None."""
    if not is_configuration(obj):
        return None
    ref = (obj.get("spec") or {}).get("writeConnectionSecretToRef")
    if not isinstance(ref, Mapping) or not ref.get("name"):
        return None
    return str(ref.get("namespace") or PROVIDER_DEFAULT_NAMESPACE), str(ref["name"])


def foreign_connection_secret(obj: Mapping[str, Any], live: Mapping[str, Any] | None
                              ) -> str | None:
    """Why a Configuration must not be written where ``live`` is the Secret its
    ``writeConnectionSecretToRef`` names, or None. The terraform controller overwrites an
    existing Secret of that name whose labels name no other Configuration (its own check
    reads only the owner labels, which a Secret it did not create lacks) and deletes the
    Secret of that name, whoever made it, when the Configuration is deleted: a
    Configuration naming a Secret it did not write would replace another's Secret with the
    module's outputs, then delete it. So that Secret must not exist yet, or carry the
    controller's owner labels naming this Configuration. Names only the Secret, never a
    value of it."""
    found = connection_secret(obj)
    if found is None or live is None:
        return None
    meta = obj.get("metadata") or {}
    labels = (live.get("metadata") or {}).get("labels") or {}
    if labels.get(OWNED_BY) == meta.get("name") and \
            labels.get(OWNED_NAMESPACE) == meta.get("namespace"):
        return None
    return (f"its connection Secret {found[0]}/{found[1]} exists and was not written for "
            f"this Configuration (labels {OWNED_BY}, {OWNED_NAMESPACE}): the terraform "
            "controller writes the module's outputs over such a Secret when it has no owner "
            "label, and deletes it with the Configuration in any case; name a Secret that "
            "does not exist")
