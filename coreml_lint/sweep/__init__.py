"""The op-behaviour sweep: lower single-op programs over dtypes, argument values, shapes,
operand origins and deployment targets with the stock ``CoreMLPartitioner``, judge each
with the ``verify`` oracle, and write what was measured to ``measured/data/behaviour.json``
(read by CML801). ``python -m coreml_lint.sweep --help``.
"""
