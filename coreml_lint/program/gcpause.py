"""Pause the cyclic garbage collector while we build large acyclic structures.

Reading a 25k-node program allocates millions of small objects (the JSON document, then
the graph); each young-generation collection walks the ones still alive, which more
than doubled the reading time. Nothing we build there forms a reference cycle, so
reference counting frees it all, and the collector's previous state is restored after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
