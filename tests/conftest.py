from __future__ import annotations

import importlib.util
import io
import logging
import os
import random
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("TQDM_DISABLE", "1")
logging.getLogger("coremltools").setLevel(logging.ERROR)

from coreml_lint.core.version import HEAVY_INSTALL_COMMAND  # noqa: E402
from coreml_lint.program.placement import PartitionerSettings  # noqa: E402

# The packages of the heavy install. In the light install (no torch) a test that needs one
# is skipped, saying which; everything else runs.
HEAVY = ("torch", "executorch", "coremltools", "torchao", "transformers", "numpy")
INSTALL = HEAVY_INSTALL_COMMAND


def _missing(error: BaseException) -> str | None:
    """The heavy package ``error`` failed to import, when it really is not installed."""
    from importlib.metadata import PackageNotFoundError

    while error is not None:
        if isinstance(error, ModuleNotFoundError):
            name = error.name or ""
        elif isinstance(error, PackageNotFoundError):
            name = str(error.args[0]) if error.args else ""
        else:
            name = ""
        top = name.split(".")[0]
        if top in HEAVY and importlib.util.find_spec(top) is None:
            return top
        error = error.__cause__ or error.__context__
    return None


class _NeedsHeavyModule(pytest.Module):
    """A test module whose imports need a package the light install lacks: one skip."""

    def _getobj(self):
        try:
            return super()._getobj()
        except self.CollectError as error:
            cause = _missing(error.__cause__ or error.__context__)
            if cause is None:
                raise
            pytest.skip(f"needs {cause}: {INSTALL}", allow_module_level=True)


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    if module_path.name == "conftest.py":
        return None
    return _NeedsHeavyModule.from_parent(parent, path=module_path)


def _skip_when_heavy_missing(error: BaseException) -> None:
    cause = _missing(error)
    if cause is not None:
        pytest.skip(f"needs {cause}: {INSTALL}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: Any) -> Any:
    try:
        return (yield)
    except Exception as error:
        _skip_when_heavy_missing(error)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    try:
        return (yield)
    except Exception as error:
        _skip_when_heavy_missing(error)
        raise


@pytest.fixture(autouse=True)
def _random_draws_do_not_depend_on_test_order():
    """Each test starts torch and ``random`` from one seed: under xdist a worker's earlier
    tests differ from run to run, so an unseeded ``torch.randn`` drew other values each time
    (CI once drew integers that missed every value an fp16 division rounds wrong). A test
    about values names them; a module's own numpy generator is its own."""
    torch = sys.modules.get("torch")
    if torch is not None:  # not yet imported: torch starts from its fixed default seed
        torch.manual_seed(0)
    random.seed(0)
    yield


@pytest.fixture(autouse=True)
def _grad_mode_is_left_as_found():
    """A test (or the code it calls) that turns torch's grad mode off for good changes every
    later export in the worker (CML204's cases stop being flagged): an error where it leaks."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None and not torch.is_grad_enabled():
        torch.set_grad_enabled(True)
        pytest.fail("the test left torch's grad mode disabled (set_grad_enabled(False) leaked)")


@cache
def _cases() -> dict[str, Any]:
    """Every program case by id (tests/cases.py defines torch modules: imported on use)."""
    from cases import BY_ID

    return BY_ID


def _archive(case_id: str) -> bytes:
    """A case's ``.pt2`` bytes, exported once per test session (see :func:`_archive_of`)."""
    make = _cases()[case_id].make
    first = next(c.id for c in _cases().values() if c.make is make)  # the builder's name
    return _archive_of(make, first)


# Where a session's workers share the archives they exported (set by ``_shared_archives``).
_SHARED: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _shared_archives(tmp_path_factory: Any) -> None:
    """One folder for the whole session, shared by its xdist workers (their base temp
    folders have one parent): a case exported by one worker is read by the other."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "case-archives"
    folder.mkdir(exist_ok=True)
    _SHARED[:] = [folder]


@cache
def _archive_of(make: Any, key: str) -> bytes:
    """Keyed by the builder, not the case, and shared by the session's workers: the cases
    of one model at several targets or settings share one builder (CML107's 63 cases come
    from 17 quantized models, four of them PT2E-quantized at over a minute each), so each
    model is quantized and exported once per session, not once per case or per worker."""
    if not _SHARED:
        return _export_bytes(make)
    import fcntl

    path = _SHARED[0] / (re.sub(r"[^\w.-]", "_", key) + ".pt2")
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for this export
        if path.exists():
            return path.read_bytes()
        data = _export_bytes(make)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        return data


def _export_bytes(make: Any) -> bytes:
    import torch

    model, inputs = make()
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(model, inputs), buffer)
    return buffer.getvalue()


def exported(case_id: str) -> Any:
    """A case's exported program: exported once per session and loaded afresh for each
    use, because lowering mutates the program it is given. A program another worker
    exported may hold what only the builder registers in its process (a custom op): then
    this process builds it once too."""
    import torch

    try:
        return torch.export.load(io.BytesIO(_archive(case_id)))
    except Exception:
        return torch.export.load(io.BytesIO(_built_here(_cases()[case_id].make)))


@cache
def _built_here(make: Any) -> bytes:
    return _export_bytes(make)


def settings_of(case_id: str) -> PartitionerSettings:
    s = _cases()[case_id].settings
    return PartitionerSettings(
        minimum_deployment_target=s.get("ios") or 15,
        skip_ops_for_coreml_delegation=tuple(s.get("skip") or ()),
        take_over_mutable_buffer=s.get("take_over_mutable_buffer", True),
        take_over_constant_data=s.get("take_over_constant_data", True),
        lower_full_graph=s.get("lower_full_graph", False),
    )


@pytest.fixture
def export_case():
    return exported


@pytest.fixture
def case_settings():
    return settings_of
