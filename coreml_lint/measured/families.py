"""Families of ops, for the sweep's report and for where a way of answering an unmeasured
call holds out (``data/prediction_gates.json``).
"""

from __future__ import annotations

import re
from functools import cache

# Families of ops, for the sweep's report and for where a prediction rule holds out
# (``prediction_gates.json``): the first pattern an op's name matches.
FAMILIES = (
    ("attention", r"attention"),
    ("normalization", r"norm"),
    ("convolution", r"conv|col2im|im2col"),
    ("pooling", r"pool"),
    ("matmul/linear", r"^(mm|bmm|addmm|baddbmm|matmul|linear|dot|mv|outer|einsum)\."),
    (
        "reduction",
        r"^(sum|mean|amax|amin|max|min|var|std|prod|any|all|argmax|argmin|logsumexp|cumsum|cumprod|norm|linalg)",
    ),
    ("comparison/logical", r"^(eq|ne|lt|le|gt|ge|logical|bitwise|isnan|where)"),
    ("index/gather/scatter", r"index|gather|scatter|embedding|select|slice|take|masked"),
    ("fill/factory", r"^(full|zeros|ones|empty|arange|eye|scalar_tensor|new_|fill|linspace)"),
    (
        "activation",
        r"relu|gelu|silu|sigmoid|tanh|elu|softmax|softplus|hard|mish|glu|prelu|log_softmax|threshold",
    ),
    # resampling computes new values between the input's (a filter, antialiasing): not a
    # copy, and its answers hold out apart from the copies'
    ("resize", r"upsample|interp|grid_sampler"),
    (
        "shape/copy",
        r"view|reshape|permute|transpose|expand|squeeze|unsqueeze|cat|stack|split|flatten|repeat|tile|flip|roll|copy|clone|pad|chunk|unbind|narrow|alias|contiguous|t\.|numpy_T|atleast|broadcast|pixel|grid",
    ),
    ("elementwise math", r"."),
)


@cache
def family(op: str) -> str:
    """The family of an op (``aten.`` prefix or not)."""
    name = op.removeprefix("aten.")
    return next(f for f, pattern in FAMILIES if re.search(pattern, name))
