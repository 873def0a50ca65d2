"""Reading the shipped CRDs and writing ``config/`` (``make manifests``)."""

from __future__ import annotations

from pathlib import Path

from federation.controllers import install as installer
from federation.deploy import layout
from federation.deploy.manifests import JSON, Options


def shipped_crds() -> list[JSON]:
    """federation/crds/*.yaml with the digest ``fedctl install`` stamps on each CRD."""
    return [installer.with_digest(doc) for doc in installer.crd_documents()]


def generate(options: Options | None = None) -> dict[str, str]:
    """The ``config/`` files for ``options`` (the defaults: what the repository ships)."""
    return layout.files(options or Options(), shipped_crds())


def write(root: Path, options: Options | None = None) -> list[Path]:
    """Write ``config/`` under ``root``; files the generator no longer makes are removed
    (only ``*.yaml``: a stale file would still be in the tree the test compares)."""
    wanted = {root / path: text for path, text in generate(options).items()}
    for stale in sorted(set(root.rglob("*.yaml")) - set(wanted)):
        stale.unlink()
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return sorted(wanted)
