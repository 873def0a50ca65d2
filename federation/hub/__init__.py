"""Pure helpers over hub API objects: no I/O, no clients.

What the controllers and the commands both read from hub objects lives here once:
policies as placement input (:mod:`.propagation_policies`), MemberClusters as placement clusters
(:mod:`.clusters`), and the ResourceBinding as the one record of a template's decision
and pending clean-up (:mod:`.bindings`). Below ``controllers`` and ``commands``, above
``placement``.
"""
