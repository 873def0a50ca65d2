"""The checked-in generated code is what the pinned generator makes of reconfigure.proto."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROTO = "federation/reloader/proto/reconfigure.proto"


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    plugin = shutil.which("protoc-gen-mypy", path=str(Path(sys.executable).parent))
    if plugin is None:
        pytest.skip("mypy-protobuf is not installed")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}",
                    f"--python_out={tmp_path}", f"--mypy_out={tmp_path}",
                    f"--plugin=protoc-gen-mypy={plugin}", str(ROOT / PROTO)],
                   check=True, capture_output=True)
    for name in ("reconfigure_pb2.py", "reconfigure_pb2.pyi"):
        fresh = (tmp_path / "federation/reloader/proto" / name).read_text()
        kept = (ROOT / "federation/reloader/proto" / name).read_text()
        assert fresh == kept, f"{name} is stale: run `make proto`"
