"""CML312 reads a program input's dim order from its recorded strides, without torch: the
order must be the one ``Tensor.dim_order()`` gives, which coremltools checks, including
where size-1 dims make a tensor both contiguous and channels-last."""

from __future__ import annotations

import itertools

import pytest

from coreml_lint.program.layout import dim_order

SHAPES = [
    (2, 8, 1, 1),
    (1, 8, 10, 10),
    (1, 1, 1, 1),
    (2, 3, 4, 5),
    (1, 3, 1, 5),
    (4, 1, 4, 1),
    (2, 3),
    (3, 1),
    (2, 2, 2),
    (1, 2, 3, 4, 5),
    (2, 1, 3, 1, 2),
]


def _layouts(torch, shape):
    """The tensor contiguous, channels-last where it has that rank, and at every
    permutation of its dims in memory."""
    base = torch.empty(shape)
    yield base
    if len(shape) == 4:
        yield base.to(memory_format=torch.channels_last)
    if len(shape) == 5:
        yield base.to(memory_format=torch.channels_last_3d)
    for perm in itertools.permutations(range(len(shape))):
        back = [perm.index(i) for i in range(len(shape))]
        yield torch.empty([shape[p] for p in perm]).permute(*back)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_dim_order_is_torch_s(shape):
    torch = pytest.importorskip("torch")
    for tensor in _layouts(torch, shape):
        expected = list(tensor.dim_order())
        assert dim_order(tuple(tensor.shape), tuple(tensor.stride())) == expected, tensor.stride()


def test_a_channels_last_image_of_one_pixel_is_not_in_order():
    assert dim_order((2, 8, 1, 1), (8, 1, 8, 8)) == [0, 2, 3, 1]
    assert dim_order((2, 8, 1, 1), (8, 1, 1, 1)) == [0, 1, 2, 3]
