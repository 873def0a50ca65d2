"""federation: a multi-cluster Kubernetes federation control plane.

Parts, in layers that import only downwards (checked by the import-linter contracts in
``pyproject.toml``; parts on one line are independent of each other; README's "Layout"
says what each is and "Names" which word names which concept):

- :mod:`federation.commands`: the ``fedctl`` command groups.
- :mod:`federation.agent`: ``fedctl agent``, a pull member's side of the work protocol;
  :mod:`federation.reloader`: ``fedctl reloader``, the sidecar configuration rollouts call;
  :mod:`federation.deploy`: the manifests of ``config/`` (``fedctl install --control-plane``).
- :mod:`federation.controllers`: reconcilers, writing only through the multi-cluster client.
- :mod:`federation.applications`: Applications (KubeVela's model), pure.
- :mod:`federation.runtime`: work queues, controllers, the manager, leader election;
  :mod:`federation.local`: a local fleet of real kube-apiserver + etcd processes;
  :mod:`federation.hub`: the hub vocabulary, pure values about our API and objects;
  :mod:`federation.work`: the work protocol and the hub's side of pull members.
- :mod:`federation.contexts`: kubeconfigs, per-cluster clients, caches, health;
  :mod:`federation.placement`: pure scheduling (policies, clusters, decisions), no I/O;
  :mod:`federation.rbac`: the control plane's least-privilege rules, as data;
  :mod:`federation.rollouts`: configuration rollouts' file formats, constraints and diffs.
- :mod:`federation.untrusted`: untrusted text to data within limits, below everything.
"""

__version__ = "0.1.0"
