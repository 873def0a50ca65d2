"""scripts/build-image.sh's pure parts, run in bash on their own (no build)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "build-image.sh"


def public_source_url(remote: str) -> str:
    """The script's own public_source_url function, cut out of it and called."""
    text = SCRIPT.read_text()
    start = text.index("public_source_url() {")
    function = text[start:text.index("\n}\n", start) + 3]
    result = subprocess.run(["bash", "-c", function + 'public_source_url "$1"', "bash", remote],
                            capture_output=True, text=True, check=True, timeout=30)
    return result.stdout.strip()


def test_a_token_in_the_remote_never_reaches_the_image_label() -> None:
    """A remote cloned with credentials in its URL: the label keeps the address only."""
    label = public_source_url("https://ci-bot:ghp_secret123@git.example.com/org/fed.git")
    assert label == "https://git.example.com/org/fed.git"
    assert "secret" not in label


@pytest.mark.parametrize("remote", ["/srv/ci/clone-of-main", "file:///srv/repo",
                                    "git@git.example.com:org/fed.git", ""])
def test_a_remote_that_is_not_a_public_address_leaves_the_label_empty(remote: str) -> None:
    assert public_source_url(remote) == ""


def test_a_public_address_is_kept() -> None:
    assert public_source_url("https://git.example.com/org/fed") == "https://git.example.com/org/fed"
