"""federation: a multi-cluster Kubernetes federation control plane.

Parts, each importing only the ones listed before it:

- :mod:`federation.placement`: pure scheduling (policies, clusters, decisions); no I/O.
- :mod:`federation.local`: a local fleet of real kube-apiserver + etcd processes.
- :mod:`federation.contexts`: kubeconfigs, per-cluster clients, caches, health.
- :mod:`federation.controllers`: reconcilers, writing only through the multi-cluster client.
- :mod:`federation.commands`: the ``fedctl`` command groups.
"""

__version__ = "0.1.0"
