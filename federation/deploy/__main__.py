"""``python -m federation.deploy [DIR]``: write the ``config/`` tree (``make manifests``);
``python -m federation.deploy --permissions``: print docs/install.md's permissions table."""

from __future__ import annotations

import sys
from pathlib import Path

from federation.deploy import tree


def main(argv: list[str]) -> int:
    if argv[1:] == ["--permissions"]:
        from federation.deploy import layout
        from federation.deploy.manifests import Options

        print(layout.permissions_table(Options()), end="")
        return 0
    if len(argv) > 2 or any(arg.startswith("-") for arg in argv[1:]):
        print("usage: python -m federation.deploy [DIR] | --permissions", file=sys.stderr)
        return 2
    root = Path(argv[1] if len(argv) > 1 else "config")
    written = tree.write(root)
    print(f"{root}: {len(written)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
