"""What an operator applies to run federation in a cluster: the manifests of ``config/``.

:mod:`federation.deploy.manifests` generates every object (pure functions returning plain
dicts); :mod:`federation.deploy.layout` arranges them as kubebuilder's ``config/`` kustomize
layout. ``make manifests`` writes that tree, ``fedctl install --control-plane`` applies the
same objects and a unit test keeps the two equal.
"""
