"""The image definition, read as text: what must hold before anything is built.

tests/image build the Containerfile and run the result; these checks need no builder, so a
change that breaks a convention (a floating base, a root user, a version left behind, a work
tree sent whole to a builder) fails in the unit suite, on any machine.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CONTAINERFILE = (ROOT / "Containerfile").read_text()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def instructions(keyword: str) -> list[str]:
    """The arguments of every KEYWORD instruction, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", CONTAINERFILE)
    return [line.split(None, 1)[1] for line in joined.splitlines()
            if line.split(None, 1)[:1] == [keyword]]


def arg_defaults() -> dict[str, str]:
    pairs = (arg.split("=", 1) for arg in instructions("ARG") if "=" in arg)
    return {name: value for name, value in pairs}


def test_both_bases_are_pinned_by_digest() -> None:
    """A tag moves; a digest names one image, so a build is the same wherever it runs."""
    froms = instructions("FROM")
    assert froms == ["${BUILDER_IMAGE} AS builder", "${RUNTIME_IMAGE}"]
    for name in ("BUILDER_IMAGE", "RUNTIME_IMAGE"):
        assert re.fullmatch(r"[a-z0-9./-]+@sha256:[0-9a-f]{64}", arg_defaults()[name]), name


def test_the_final_stage_runs_fedctl_as_a_numeric_non_root_user() -> None:
    """Numeric, so runAsNonRoot can check it without a passwd lookup."""
    assert instructions("USER") == ["65532:65532"]
    assert json.loads(instructions("ENTRYPOINT")[0]) == ["fedctl"]


def test_the_labels_name_this_project() -> None:
    """OCI labels: the version default and the licence are pyproject's, so a bump or a
    relicence cannot leave the image saying otherwise."""
    assert arg_defaults()["VERSION"] == PROJECT["version"]
    labels = dict(re.findall(r'(org\.opencontainers\.image\.[a-z]+)="([^"]*)"',
                             " ".join(instructions("LABEL"))))
    assert labels == {
        "org.opencontainers.image.title": "fedctl",
        "org.opencontainers.image.description": labels["org.opencontainers.image.description"],
        "org.opencontainers.image.version": "${VERSION}",
        "org.opencontainers.image.revision": "${REVISION}",
        "org.opencontainers.image.source": "${SOURCE_URL}",
        "org.opencontainers.image.licenses": PROJECT["license"],
    }
    assert labels["org.opencontainers.image.description"]


def test_dependencies_are_installed_only_from_hash_checked_wheels() -> None:
    """Every download is checked against requirements.lock; the install resolves among
    those files alone (--no-index), so no unlocked or unhashed package can get in."""
    runs = " && ".join(instructions("RUN"))
    assert "--require-hashes" in runs and "-r requirements.lock" in runs
    installs = re.findall(r"pip (?:--python \S+ )?(?:install|wheel)[^&]*", runs)
    assert len(installs) == 3  # setuptools into the builder, the project's wheel, the venv
    for install in installs:
        assert "--no-index" in install, install
    assert "--without-pip" in runs


def test_the_build_context_is_an_allowlist() -> None:
    """Kubeconfigs with credentials and a local fleet's keys live in the work tree: only the
    files the Containerfile copies may reach a builder."""
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert rules[0] == "*"
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    copied = {source for copy in instructions("COPY") if not copy.startswith("--from")
              for source in copy.split()[:-1]}
    assert allowed == copied
