"""The controller runtime: reconcile requests, work queues, controllers, the manager, leases.

What controller-runtime gives Go operators, made multi-cluster, in asyncio.
It sits on :mod:`federation.contexts` (clusters, caches, the multi-cluster
client) and never below it: nothing in ``contexts`` imports from here.
"""
