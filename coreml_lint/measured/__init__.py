"""Measured op behaviour, one room: what the sweep measures and the linter reads.

Why a measured table: the stock partitioner delegates by op *name*, so whether a delegated
node converts, and computes the right values, depends on its dtypes, argument values and
the deployment target, and nobody can read that off a changelog. ``python -m
coreml_lint.sweep`` lowers single-op programs over those dimensions with the stock
``CoreMLPartitioner``, judges each with the ``verify`` oracle and writes the outcomes to
``data/behaviour.json``; CML801 matches every Core ML node against them.

- ``key.py``: the key of a call (``Key``, ``KeyMaker``) and the sweep's record of it;
- ``values.py``: how argument values and shapes are keyed (exact, or by class);
- ``case.py``: the sweep's case and result records, typed;
- ``entry.py``, ``outcomes.py``, ``families.py``: a measured row, what it can say, op families;
- ``table.py``: the torch-free reader and how it answers a key;
- ``versions.py``, ``stack.py``: which table answers for which stack;
- ``coreai_table.py``: Core AI's table, measured by the same sweep and read by the same reader.

Everything here is torch-free: the light lint path reads the table without importing torch.
"""
