"""A stage of the real stacks (``core/stages.py``): timed whether it fails or not, and a
failure kept on the result with its stage, never raised. Lowering, Core AI's conversion and
Core AI's run all report through it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from coreml_lint.core.stages import stage


@dataclass
class _Result:
    error: BaseException | None = None
    stage: str = ""
    timings: dict[str, float] = field(default_factory=dict)


def test_a_stage_that_succeeds_is_timed_and_leaves_no_error():
    result = _Result()
    with stage(result, "to_edge_transform_and_lower", timing="lower"):
        time.sleep(0.01)
    assert result.error is None and result.stage == ""
    assert list(result.timings) == ["lower"] and result.timings["lower"] >= 0.01


def test_a_stage_that_fails_is_kept_on_the_result_not_raised_and_still_timed():
    result = _Result()
    with stage(result, "convert"):
        time.sleep(0.01)
        raise ValueError("unsupported op")
    assert isinstance(result.error, ValueError) and result.stage == "convert"
    assert result.timings["convert"] >= 0.01
    with stage(result, "save_asset"):  # a later stage does not hide the first failure's
        pass
    assert result.stage == "convert" and set(result.timings) == {"convert", "save_asset"}


def test_an_interrupt_is_not_a_result():
    result = _Result()
    try:
        with stage(result, "run"):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    else:  # pragma: no cover
        raise AssertionError("Ctrl-C was swallowed")
    assert result.error is None and "run" in result.timings
