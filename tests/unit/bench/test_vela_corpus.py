"""The KubeVela corpus script on a tiny mirror of its own making (CI has no network): it
finds Applications in YAML files and in Markdown's fenced blocks, skips what KubeVela would
refuse, runs the rest through ``fedctl app dry-run`` and groups the refusals."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

PATH = Path(__file__).resolve().parents[3] / "bench" / "vela_corpus.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vela_corpus", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


corpus = _load()

GOOD = """\
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: ok}
spec:
  components: [{name: web, type: webservice, properties: {image: nginx}}]
  policies: [{name: t, type: topology, properties: {clusters: [hangzhou]}}]
"""
PAGE = f"""# A page

```yaml
{GOOD.replace("name: ok", "name: helm").replace("type: webservice", "type: helm")}
```

```yaml
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {{name: placeholder}}
spec:
  components: [{{name: web, type: webservice, properties: {{image: <your-image>}}}}]
```
"""


def _mirror(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.yaml").write_text(GOOD)
    (work / "copy.yml").write_text(GOOD)  # the same spec counts once
    (work / "page.md").write_text(PAGE)
    (work / "broken.yaml").write_text("kind: Application\nspec: [\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "corpus"], check=True)
    return work / ".git"


def test_counts_and_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert corpus.main([str(_mirror(tmp_path)), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts["valid_upstream"] == 2 and counts["accepted"] == 1
    assert counts["skipped"] == {"malformed YAML": 1,
                                 "placeholders (<...>, ${...}, {{...}})": 1}
    assert counts["refusals"] == {
        "spec.components[].type: 'helm' is not a built-in type": 1}


@pytest.mark.parametrize(("line", "group"), [
    ("error: /tmp/x/app.yaml: spec.components[3].traits[1].type: 'gateway' is not a "
     "built-in trait (scaler, labels)", "spec.components[].traits[].type: 'gateway' is not "
     "a built-in trait"),
    ("error: /tmp/x/app.yaml: policy eu properties.clusters: no member cluster 'x'",
     "policy P properties.clusters: no member cluster '…'"),
])
def test_reasons_drop_paths_indices_and_names(line: str, group: str) -> None:
    assert corpus.reason(line) == group


SYNCER = """syncer: {
	type: "component"
	attributes: workload: type: "autodetects.core.oam.dev"
}
template: {
	output: {apiVersion: "sync.example.com/v1", kind: "Sync", spec: url: parameter.url}
	parameter: url: string
}
"""
BROKEN_TRAIT = """watcher: {
	type: "trait"
	attributes: workload: type: "autodetects.core.oam.dev"
}
template: {patch: {}}
"""


def _catalog(tmp_path: Path) -> Path:
    """A catalog of our own: an addon whose definition converts, one whose trait vela-core's
    conversion refuses (so vela addon enable would fail), Applications using each."""
    work = tmp_path / "catalog"
    (work / "addons" / "syncer" / "definitions" / "nested").mkdir(parents=True)
    (work / "addons" / "syncer" / "definitions" / "nested" / "syncer.cue").write_text(SYNCER)
    (work / "experimental" / "addons" / "watch" / "definitions").mkdir(parents=True)
    (work / "experimental" / "addons" / "watch" / "definitions" / "w.cue").write_text(
        BROKEN_TRAIT)
    (work / "examples").mkdir()
    uses = GOOD.replace("type: webservice, properties: {image: nginx}",
                        "type: syncer, properties: {url: 'https://x'}")
    (work / "examples" / "sync.yaml").write_text(uses)
    watched = GOOD.replace("{image: nginx}", "{image: nginx}, traits: [{type: watcher}]")
    (work / "examples" / "watched.yaml").write_text(watched)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "catalog"], check=True)
    return work / ".git"


def test_addons_are_enabled_as_vela_addon_enable_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An Application naming an addon's type gets that addon's converted definitions and
    counts only if they render it; one needing an addon vela-core cannot enable is
    skipped; without addons the first is refused."""
    mirror = str(_catalog(tmp_path))
    assert corpus.main([mirror, "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["valid_upstream"], counts["accepted"]) == (1, 1)
    assert counts["addons"] == {"addons/syncer": {"needed_by": 1, "accepted": 1}}
    assert counts["skipped"] == {
        "needs addon experimental/addons/watch, which vela addon enable refuses": 1}
    assert corpus.main([mirror, "--json", "--no-addons"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["valid_upstream"], counts["accepted"]) == (2, 0)
