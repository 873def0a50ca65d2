"""Least-privilege RBAC for the control plane, on the hub and in every member.

The control plane needs two kinds of rights. Fixed ones, found by reading every
call it makes (our own API on the hub, Events, CRDs, nodes for capacity, the
joined clusters' Secrets, its Lease...), live as data in ``rules.yaml``, each
with the reason it exists. The rest depend on what it propagates: the operator
lists the kinds (``--propagate-kinds``, a documented default covering the
common workload kinds) and :mod:`.roles` turns them into rules: read and
update templates on the hub (Secrets only in the namespaces granted one by one,
never cluster-wide), full control of the copies in members. Nothing is ever ``*``;
the kinds of :mod:`.never` (RBAC kinds among them: a policy author could then hand
the control plane's member rights to anyone) are refused by name.

Pure: no I/O beyond reading the package's own data file, no cluster access.
``fedctl rbac`` prints the manifests; ``fedctl install`` and ``fedctl join
--create-service-account`` apply them.
"""
