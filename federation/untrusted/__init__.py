"""Untrusted input to data, within limits: the lowest layer, pure, shared by every reader.

Anything a user or tenant hands us as text (policy files, manifests, kubeconfigs, config
files in a governed ConfigMap, an action file) goes through :mod:`documents` before any
recursive or unbounded parser sees it, so one capped loader (the one ``fedctl plan`` proved
on its fuzz corpus) guards every entry point.
"""
