"""federation: a multi-cluster Kubernetes federation control plane.

Parts, in layers that import only downwards (checked by the import-linter contracts in
``pyproject.toml``; parts on one line are independent of each other):

- :mod:`federation.commands`: the ``fedctl`` command groups.
- :mod:`federation.deploy`: the manifests of ``config/`` (``fedctl install --control-plane``).
- :mod:`federation.controllers`: reconcilers, writing only through the multi-cluster client.
- :mod:`federation.runtime`: work queues, controllers, the manager, leader election;
  :mod:`federation.local`: a local fleet of real kube-apiserver + etcd processes.
- :mod:`federation.contexts`: kubeconfigs, per-cluster clients, caches, health;
  :mod:`federation.placement`: pure scheduling (policies, clusters, decisions), no I/O;
  :mod:`federation.rbac`: the control plane's least-privilege rules, as data.
"""

__version__ = "0.1.0"
