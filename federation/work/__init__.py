"""Pull-mode members: the work protocol (``proto/work.proto``), the hub's side of it and the
agents' identities. See docs/agent.md; the agent itself is :mod:`federation.agent`."""
