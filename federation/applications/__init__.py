"""Applications (KubeVela's model) as pure functions: no I/O, no clock, no client.

:mod:`.model` validates an Application's spec (KubeVela's field names), :mod:`.render`
turns components and traits into manifests (with :mod:`.pods`, :mod:`.storage`,
:mod:`.ingress`, :mod:`.jsonpatch` and :mod:`.fields`), :mod:`.patches` applies override
policies' component patches as KubeVela does, :mod:`.policies` turns topology and
override policies into per-cluster manifests through the placement engine,
:mod:`.revision` hashes content into revisions, :mod:`.workflow` is the step state
machine and :mod:`.tracker` the ResourceTracker's diff. :mod:`.compile` ties them
together for one revision. The controller (``federation.controllers.applications``) and
``fedctl app dry-run`` call these; docs/applications.md tells the whole story.
"""
