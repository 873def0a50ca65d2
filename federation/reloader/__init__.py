"""``fedctl reloader``: the Reconfigure sidecar (see :mod:`federation.reloader.server`)."""

NAMESPACE_HEADER = "federation-namespace"
"""gRPC metadata naming the namespace of the workload a call is meant for. Callers find
reloaders in member EndpointSlices, which a namespace's owner may shape (a selector-less
Service with hand-written endpoints), and every reloader certificate carries the same
name, so TLS alone cannot tell one reloader from another: the reloader checks this
against the namespace it serves."""
