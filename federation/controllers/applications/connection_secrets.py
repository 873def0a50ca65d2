"""Before a terraform Configuration is written in a member: the connection Secret it names.

The member's terraform controller writes the module's outputs into the Secret a
Configuration's ``writeConnectionSecretToRef`` names, over an existing one that carries no
owner label, and deletes the Secret of that name, whoever made it, with the Configuration
(:func:`federation.applications.terraform.foreign_connection_secret`). A tenant's
Configuration naming a Secret of its namespace it did not write (the registry login a
member administrator put there, another Application's, a propagated copy) would have that
controller replace it and later delete it, with an identity the tenant does not hold. So a
Configuration is written only where that Secret does not exist or carries the controller's
owner labels naming it; otherwise the object is a problem (``Applied=False``) naming the
Secret, and nothing is written. A member that cannot be read holds it too.

This reads the Secret's labels from the member's cache (the control plane caches members'
Secrets to manage its copies); no value of it is kept or said.
"""

from __future__ import annotations

import copy

from federation.applications import cloud_resource, terraform, tracker
from federation.contexts.cache import ReadOnly
from federation.contexts.client import ClientError
from federation.contexts.scoped import NotGranted
from federation.controllers.applications.build import JSON, Build
from federation.controllers.applications.view import ApplicationView
from federation.controllers.kit.secrets import SECRETS
from federation.hub import manifests


async def held(view: ApplicationView, entry: tracker.Entry, desired: JSON) -> str | None:
    """Why ``desired`` (a Configuration) is not written to ``entry.cluster``, or None."""
    found = terraform.connection_secret(desired)
    if found is None:
        return None
    namespace, name = found
    try:
        live = await _read(view, entry.cluster, "v1", "Secret", name, namespace)
    except ClientError as exc:
        return f"cannot read its connection Secret {namespace}/{name}: {exc}"
    return terraform.foreign_connection_secret(desired, live)


async def filled(view: ApplicationView, build: Build, entry: tracker.Entry, desired: JSON
                 ) -> tuple[JSON | None, str]:
    """A copy of a connection Secret (``deploy-cloud-resource``, ``share-cloud-resource``:
    its source is in the compiled manifest, :func:`cloud_resource.source_of`) with the
    source's data, or None and why it is not written now; any other object as it is.

    Copied only if the Application's hub namespace has the Secret grant (RoleBinding
    ``federation:control-plane:secrets``: the administrator's consent that its Secrets
    move), the Configuration the source belongs to is this Application's in the local
    cluster, and the source carries the terraform controller's labels naming that
    Configuration. The data goes from the member's cache into this write only: never into
    the workflow's state, a message, an Event or a log line."""
    source = cloud_resource.source_of(desired)
    if source is None:
        return desired, ""
    namespace = build.namespace
    if _step_type(build, entry.step) not in cloud_resource.STEP_TYPES or \
            entry.namespace != namespace:  # the compile refuses both; never trust a mark
        return None, (f"annotation {cloud_resource.COPY_ANNOTATION} outside a cloud-resource "
                      "step's copy in the Application's namespace: not written")
    where = f"connection Secret {namespace}/{source.secret} in {source.cluster}"
    try:
        await view.list(SECRETS, namespace)  # NotGranted where no grant opens it
        configuration = await _read(view, source.cluster, terraform.API_VERSION,
                                    terraform.KIND, source.configuration, namespace)
        secret = await _read(view, source.cluster, "v1", "Secret", source.secret, namespace)
    except NotGranted as exc:
        return None, f"not copied: Secrets of namespace {namespace} are not granted: {exc}"
    except ClientError as exc:
        return None, f"cannot read the {where}: {exc}"
    if configuration is None or not manifests.is_ours(configuration) or \
            manifests.application_of(configuration) != build.owner:
        return None, (f"waiting for Configuration {namespace}/{source.configuration} of this "
                      f"Application in {source.cluster} (deploy-cloud-resource applies it)")
    if secret is None:
        return None, (f"waiting for the {where} (its terraform controller writes it once "
                      f"Configuration {source.configuration} is available)")
    foreign = terraform.foreign_connection_secret(configuration, secret)
    if foreign is not None:
        return None, f"not copied: Configuration {source.configuration}: {foreign}"
    body = copy.deepcopy(desired)
    body["type"] = "Opaque"
    body["data"] = dict(secret.get("data") or {})
    return body, ""


def _step_type(build: Build, step: str) -> str:
    assert build.compiled is not None
    return next((s.type for s in build.compiled.steps if s.name == step), "")


async def _read(view: ApplicationView, cluster: str, api_version: str, kind: str, name: str,
                namespace: str) -> ReadOnly | None:
    probe = {"apiVersion": api_version, "kind": kind,
             "metadata": {"name": name, "namespace": namespace}}
    resource = await view.resource(cluster, probe)
    return await view.get(resource, name, namespace, cluster)
