"""The checked-in generated code is what the pinned generator makes of each .proto (the
work stream's and the reloader's)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("proto", ["federation/work/proto/work.proto",
                                   "federation/reloader/proto/reconfigure.proto",
                                   "federation/reloader/proto/config_manager.proto"])
def test_generated_code_matches_the_proto(proto: str, tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    plugin = shutil.which("protoc-gen-mypy", path=str(Path(sys.executable).parent))
    if plugin is None:
        pytest.skip("mypy-protobuf is not installed")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}",
                    f"--python_out={tmp_path}", f"--mypy_out={tmp_path}",
                    f"--plugin=protoc-gen-mypy={plugin}", str(ROOT / proto)],
                   check=True, capture_output=True)
    source = Path(proto)
    for name in (f"{source.stem}_pb2.py", f"{source.stem}_pb2.pyi"):
        fresh = (tmp_path / source.parent / name).read_text()
        kept = (ROOT / source.parent / name).read_text()
        assert fresh == kept, f"{name} is stale: run `make proto`"
