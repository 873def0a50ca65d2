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

from federation.applications import terraform, tracker
from federation.contexts.client import ClientError
from federation.controllers.applications.build import JSON
from federation.controllers.applications.view import ApplicationView


async def held(view: ApplicationView, entry: tracker.Entry, desired: JSON) -> str | None:
    """Why ``desired`` (a Configuration) is not written to ``entry.cluster``, or None."""
    found = terraform.connection_secret(desired)
    if found is None:
        return None
    namespace, name = found
    probe = {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": name, "namespace": namespace}}
    try:
        resource = await view.resource(entry.cluster, probe)
        live = await view.get(resource, name, namespace, entry.cluster)
    except ClientError as exc:
        return f"cannot read its connection Secret {namespace}/{name}: {exc}"
    return terraform.foreign_connection_secret(desired, live)
