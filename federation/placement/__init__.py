"""Placement: which member clusters get an object, and how many replicas each.

Pure functions over plain data (no I/O, no network, no cluster access), in
layers that only import downwards:

- :mod:`.counts`: integer and boolean field types checked as Kubernetes does;
- :mod:`.clusters`, :mod:`.policy`, :mod:`.resources`: the inputs (values);
- :mod:`.decision`: the output value and explanation helpers;
- :mod:`.selection`: readiness, affinity, taints and spread constraints;
- :mod:`.division`: Webster division with bounds and the scheduling modes;
- :mod:`.matching`: which policy wins for a resource;
- :mod:`.engine`: :func:`engine.place` and :func:`engine.plan`, the entry points;
- :mod:`.documents`: untrusted bytes to YAML/JSON data within size, depth,
  alias and document limits;
- :mod:`.loader`: parsing and validating policy, workload, cluster and
  previous-decision text (callers read the files).

Callers import modules, not names: ``from federation.placement import engine``
then ``engine.place(resource, policy, fleet, previous)``.
"""
