"""The controller kit: what every multi-object controller stands on.

A reconcile is a chain of read-only steps followed by one write phase, the shape of
KubeBlocks' plan builder over controller-runtime's reconcile contract:

- :mod:`.view`: :class:`~.view.View`, the one read-only view a step is handed (cached
  gets and lists of hub and member objects, the members as values, the clock). No
  writer is reachable from it.
- :mod:`.chain`: :class:`~.chain.Chain`, which runs ``(view, build) -> verdict`` steps in
  order; a step reads and adds to its build (facts and plan vertices), never writes.
- :mod:`.plan`: the DAG of intended writes and :func:`~.plan.execute`, which walks it.
- :mod:`.executor`: the one writer over the multi-cluster client, with the deny list
  and the identity check (:class:`~.executor.Writer`).
- :mod:`.expectations`: our own hub writes the cache has not shown yet.
- :mod:`.events`: Kubernetes Events, posted after the record they describe.
"""
