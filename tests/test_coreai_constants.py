"""The torch-free reader of a program's int64 tensor values (``program/constants.py``), which
CAI112 reads: the light lint path finds an int64 buffer past int32 with torch unimportable,
and only contiguous, unpickled int64 entries are ever read."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from coreml_lint.program.constants import int64_past_int32

LIGHT = """import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "numpy", "executorch", "coremltools", "coreai_torch"):
            raise ImportError("the light path imported " + name)
sys.meta_path.insert(0, Block())
from coreml_lint.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _archive(path: Path, entry: dict, raw: bytes, order: str = "little") -> zipfile.ZipFile:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("p/byteorder", order)
        archive.writestr("p/data/constants/t0", raw)
        config = {"config": {"lifted_tensor_0": dict(entry, path_name="t0")}}
        archive.writestr("p/data/constants/model_constants_config.json", json.dumps(config))
    return zipfile.ZipFile(path)


def _meta(sizes, strides, dtype=5, offset=0):
    return {
        "use_pickle": False,
        "tensor_meta": {
            "dtype": dtype,
            "sizes": [{"as_int": s} for s in sizes],
            "strides": [{"as_int": s} for s in strides],
            "storage_offset": {"as_int": offset},
        },
    }


def test_only_contiguous_int64_values_are_read(tmp_path):
    raw = (2**40).to_bytes(8, "little", signed=True) + (3).to_bytes(8, "little", signed=True)
    assert int64_past_int32(_archive(tmp_path / "a", _meta([2], [1]), raw), "p", "model") == {
        "lifted_tensor_0": [3, 2**40]
    }
    # the second element alone (an offset view): in range
    assert (
        int64_past_int32(_archive(tmp_path / "b", _meta([1], [1], offset=1), raw), "p", "model")
        == {}
    )
    # a strided view is not read (the storage may hold what the tensor does not)
    assert int64_past_int32(_archive(tmp_path / "c", _meta([1], [2]), raw), "p", "model") == {}
    # an int32 tensor is not read as int64
    assert (
        int64_past_int32(_archive(tmp_path / "d", _meta([2], [1], dtype=4), raw), "p", "model")
        == {}
    )
    big = (2**40).to_bytes(8, "big", signed=True) + (3).to_bytes(8, "big", signed=True)
    assert int64_past_int32(_archive(tmp_path / "e", _meta([2], [1]), big, "big"), "p", "model")


def test_light_lint_reads_an_int64_buffer_past_int32(tmp_path):
    torch = pytest.importorskip("torch")

    class Salted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("salt", torch.tensor([2**40 + 1, 3]))

        def forward(self, ids):
            return ids + self.salt

    path = tmp_path / "salted.pt2"
    torch.export.save(torch.export.export(Salted(), (torch.tensor([1, 2]),)), path)
    run = subprocess.run(
        [sys.executable, "-c", LIGHT, "--isolated", "--target", "coreai", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(Path(__file__).parents[1]), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 1, run.stderr
    assert "CAI112" in run.stdout and "int64 buffer 'salt' holds 1099511627777" in run.stdout


def test_small_float_constants_of_one_repeated_value_are_found(tmp_path):
    """An untrained ``nn.PReLU(4)``'s alpha (0.25 four times) is one repeated value; a
    trained one's, a single element, an int64 tensor and a float constant past
    ``SMALL_FLOATS`` elements are not reported."""
    import struct

    from coreml_lint.program.constants import SMALL_FLOATS, uniform_floats

    def floats(name, values, dtype=7, code="f"):
        raw = struct.pack(f"<{len(values)}{code}", *values)
        archive = _archive(tmp_path / name, _meta([len(values)], [1], dtype), raw)
        assert uniform_floats(archive, "p", "model", set()) == {}  # not wanted: not read
        return uniform_floats(archive, "p", "model", {"lifted_tensor_0"})

    assert floats("untrained", [0.25] * 4) == {"lifted_tensor_0": 0.25}
    assert floats("double", [1.0] * 3, dtype=8, code="d") == {"lifted_tensor_0": 1.0}
    assert floats("trained", [0.1, 0.2, 0.3, 0.4]) == {}
    assert floats("one", [0.25]) == {}
    assert floats("large", [0.0] * (SMALL_FLOATS + 1)) == {}
    raw = (5).to_bytes(8, "little", signed=True) * 2
    archive = _archive(tmp_path / "i", _meta([2], [1]), raw)
    assert uniform_floats(archive, "p", "model", {"lifted_tensor_0"}) == {}
