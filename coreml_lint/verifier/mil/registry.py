"""The op table: which MIL op runs how.

Each entry records the kernel and where its semantics come from, so the report (and the
conformance tests) can say, for every op, whether coremltools' own ``value_inference`` is
trusted as is, wrapped because it is wrong or slow, or replaced by our numpy kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# kernel(op, args) -> value or tuple of values; ``args`` maps each present input name to its
# numpy value (a tuple of values for tuple inputs), ``op`` is the coremltools Operation.
Kernel = Callable[[Any, dict[str, Any]], Any]

TRUSTED = "value_inference"  # coremltools' value_inference, audited and tested as is
WRAPPED = "wrapped"  # value_inference is wrong or slow here: our kernel replaces it
OWN = "own"  # no value_inference in coremltools: our kernel


@dataclass(frozen=True)
class Entry:
    kernel: Kernel
    how: str
    note: str = ""


KERNELS: dict[str, Entry] = {}


class Unsupported(Exception):
    """Raised by a kernel for a form of its op whose semantics are not pinned down (e.g.
    nearest-neighbour upsampling by a fractional scale): reported as not verified, never
    guessed."""


def kernel(*names: str, how: str = OWN, note: str = "") -> Callable[[Kernel], Kernel]:
    """Register ``fn`` as the kernel of the MIL ops ``names``."""

    def register(fn: Kernel) -> Kernel:
        for name in names:
            KERNELS[name] = Entry(fn, how, note)
        return fn

    return register


# MIL op types the torch frontend or a MIL pass can produce that have no kernel, and why
# (tests/test_verify_ops.py measures the list against coremltools' sources): a program
# holding one is reported as not verified, never as agreeing.
NO_KERNEL: dict[str, str] = {
    "cond": "control flow: emitted for TorchScript's prim::If, not for exported programs",
    "while_loop": "control flow: emitted for TorchScript's prim::Loop",
    "list_gather": "list ops: TorchScript lists only",
    "list_length": "list ops: TorchScript lists only",
    "list_write": "list ops: TorchScript lists only",
    "non_maximum_suppression": "torchvision's nms: a custom op the partitioner does not take",
    "random_categorical": "random: no eager value to compare with",
    "random_normal": "random: no eager value to compare with",
    "random_uniform": "random: no eager value to compare with",
}


def coverage() -> dict[str, str]:
    """Every op the interpreter runs, with how: ``value_inference``, ``wrapped`` or ``own``."""
    from coreml_lint.verifier.mil import load_kernels

    load_kernels()
    return {name: entry.how for name, entry in sorted(KERNELS.items())}
