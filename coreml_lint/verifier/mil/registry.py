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


def coverage() -> dict[str, str]:
    """Every op the interpreter runs, with how: ``value_inference``, ``wrapped`` or ``own``."""
    from coreml_lint.verifier.mil import load_kernels

    load_kernels()
    return {name: entry.how for name, entry in sorted(KERNELS.items())}
