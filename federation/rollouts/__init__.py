"""Configuration rollouts, the pure part: file formats, the constraint model and the diff.

``formats`` turns a config file into flat parameters and back, ``constraint`` says which
parameters are dynamic, static or immutable (KubeBlocks' ConfigConstraint, in our names),
``diff`` classifies a change and picks the reload action, ``kubeblocks`` reads KubeBlocks'
own ConfigConstraint and ParametersDefinition into that model. No I/O, no clock: the rollout
controller (:mod:`federation.controllers.rollouts`) acts on its decisions, through
propagation and the reloaders (docs/rollouts.md).
"""
