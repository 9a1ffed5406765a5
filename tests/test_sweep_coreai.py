"""The sweep's Core AI target: the generated cases measured on Core AI as their iOS18 copies at
target 27, keyed by the same ``KeyMaker`` as one whole program, and (oracle) each group of
single-op programs really converted and run on Core AI's runtime against eager: a crash, a
wrong value and agreement are each told, a group answers only when it all agrees."""

from __future__ import annotations

import pytest

from coreml_lint.measured.coreai_table import COREAI_TARGET
from coreml_lint.sweep.__main__ import main as sweep_main
from coreml_lint.sweep.coreai import coreai_cases, coreai_stack_folder
from coreml_lint.sweep.values import case_id


def _case(op, args, dtype="float32", shape=(4, 4), target=18, axis="base", kwargs=None):
    case = {
        "args": args,
        "axis": axis,
        "context": "",
        "kwargs": kwargs or {},
        "label": dtype,
        "op": op,
        "target": target,
        "tensors": [{"dtype": dtype, "origin": "in", "shape": list(shape), "values": "typical"}],
    }
    case["id"] = case_id(case)
    return case


def test_a_case_is_measured_once_as_its_ios18_copy_at_target_27():
    low, high = _case("abs.default", [{"t": 0}], target=15), _case("abs.default", [{"t": 0}])
    (made,) = coreai_cases([low, high])
    assert made["target"] == COREAI_TARGET
    assert made["id"] == case_id(made) and made["id"] not in (low["id"], high["id"])
    assert {k: v for k, v in made.items() if k not in ("id", "target")} == {
        k: v for k, v in high.items() if k not in ("id", "target")
    }


def test_the_shards_folder_names_the_core_ai_stack():
    name = coreai_stack_folder().name
    assert name.startswith("torch") and "-coreai-torch" in name and "-coreai-core" in name
    assert "coremltools" not in name  # never Core ML's folder


def test_build_without_results_writes_nothing(tmp_path):
    table = tmp_path / "t.json"
    code = sweep_main(
        ["build", "--target", "coreai", "--out", str(tmp_path / "empty"), "--table", str(table)]
    )
    assert code == 2 and not table.exists()


# -- against the real converter and runtime -------------------------------------------------

AMAX_ALL = _case("amax.default", [{"t": 0}])  # no dim: the whole tensor
POOL_EXCLUDING_PAD = _case(
    "avg_pool2d.default", [{"t": 0}, [3, 3], [2, 2], [1, 1], False, False], shape=(1, 2, 8, 8)
)
ABS = [_case("abs.default", [{"t": 0}], dtype=d) for d in ("float32", "float16", "bfloat16")]


def _measure(cases):
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")
    from coreml_lint.sweep.coreai import measure_coreai

    return measure_coreai(coreai_cases(cases))


@pytest.mark.oracle
def test_a_conversion_crash_is_measured_with_its_stage():
    (result,) = _measure([AMAX_ALL])
    assert result["outcome"] == "crash"
    assert result["message"] == "convert: IndexError: tuple index out of range"
    (key,) = result["keys"]
    assert (key["op"], key["operands"], key["variant"], key["placed"]) == (
        "aten.amax.default",
        "float32:in",
        "",
        "coreai",
    )


@pytest.mark.oracle
def test_wrong_values_are_measured_by_running_the_program():
    (result,) = _measure([POOL_EXCLUDING_PAD])
    assert result["outcome"] == "wrong", result
    assert result["message"].startswith("semantic values (output 0)")


@pytest.mark.oracle
def test_a_group_answers_only_when_every_case_agrees():
    results = _measure(ABS)  # float16 and bfloat16 fed as themselves (no precision setting)
    assert [r["outcome"] for r in results] == ["ok", "ok", "ok"]
    assert [r["keys"][0]["operands"] for r in results] == [
        "float32:in",
        "float16:in",
        "bfloat16:in",
    ]
    assert _measure([*ABS, AMAX_ALL]) == "split"
