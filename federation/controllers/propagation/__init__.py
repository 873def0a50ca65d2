"""The propagation controller: hub templates to member clusters, as a plan.

One reconcile handles one template (a user object on the hub of any kind a policy
selects). It is the KubeBlocks shape::

    template + binding (cache)
          |
          v
    transformers (read-only TransformContext) --> Build + plan (DAG of vertices)
          |                                             |
          | verdicts: go on / stop / requeue after N    v
          |                                     executor (plan.execute): the only writer
          v                                             |
    record: a second plan (binding, template status) <--+ report

The chain is :data:`~.reconciler.TRANSFORMERS`, one module per concern. The
ResourceBinding is the one record of a template (decision, pending clean-up,
conditions); templates carry no finalizer and no annotation of ours; a template
delete is finalised from the binding (:mod:`.finalise`). docs/propagation.md has the
whole story, the write budget included.
"""

from federation.controllers.kit.chain import STOP, Problem, Verdict, requeue
from federation.controllers.kit.executor import SharedCreates, Writer
from federation.controllers.propagation.build import Build, template_resource
from federation.controllers.propagation.context import (
    CacheContext,
    TransformContext,
)
from federation.controllers.propagation.reconciler import (
    TRANSFORMERS,
    CopiesFailed,
    Reconciler,
    copies_failed,
)
from federation.controllers.propagation.schedule import unknown_cluster_names
from federation.controllers.propagation.settings import PropagationSettings
from federation.hub.clusters import member_cluster
from federation.hub.propagation_policies import parse_policy

__all__ = [
    "STOP",
    "TRANSFORMERS",
    "Build",
    "CacheContext",
    "CopiesFailed",
    "Problem",
    "PropagationSettings",
    "Reconciler",
    "SharedCreates",
    "TransformContext",
    "Verdict",
    "Writer",
    "copies_failed",
    "member_cluster",
    "parse_policy",
    "requeue",
    "template_resource",
    "unknown_cluster_names",
]
