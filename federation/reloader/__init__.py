"""``fedctl reloader``: the Reconfigure sidecar (see :mod:`federation.reloader.server`)."""
