"""``fedctl agent``: runs in (or next to) a pull member, dials the hub's work server, applies
the work it receives with its own credentials and streams results and state back
(docs/agent.md)."""
