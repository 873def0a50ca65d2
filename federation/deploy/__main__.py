"""``python -m federation.deploy [DIR]``: write the ``config/`` tree (``make manifests``)."""

from __future__ import annotations

import sys
from pathlib import Path

from federation.deploy import tree


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "config")
    written = tree.write(root)
    print(f"{root}: {len(written)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
