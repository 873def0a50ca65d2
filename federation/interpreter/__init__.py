"""The resource interpreter: what an object of any kind means to the federation.

Karmada's operations, over plain JSON objects: InterpretReplica (replicas and what one
replica asks of a cluster), ReviseReplica (a copy with a cluster's share), Retain (the
fields a member owns, kept when we write), AggregateStatus, InterpretStatus (the status a
copy reflects to the hub), InterpretHealth, InterpretDependency and InterpretComponent.
:mod:`native` knows the core kinds; :mod:`customizations` holds the admin's
``ResourceInterpreterCustomization`` objects whose Lua scripts :mod:`lua` runs in a
sandbox; :mod:`engine` chooses between them by Karmada's priority rules.

Below the hub vocabulary and placement, above only ``untrusted``: pure functions of
their inputs, no cluster, no clock, no event loop (docs/interpreter.md).
"""
