"""targets.common.buffer_pool: a buffer is handed out again only once nothing outside the pool holds it."""
from __future__ import annotations

import copy
import pickle

import torch

from targets.common.buffer_pool import BufferPool


def test_reused_only_when_no_view_is_alive():
    pool = BufferPool()
    a = pool.empty((3, 4), torch.float32, "cpu")
    b = pool.empty((3, 4), torch.float32, "cpu")
    assert a.data_ptr() != b.data_ptr()
    ptr, column = a.data_ptr(), a[:, 1]
    del a
    c = pool.empty((3, 4), torch.float32, "cpu")  # a's storage is still read through `column`
    assert c.data_ptr() not in (ptr, b.data_ptr())
    del column
    d = pool.empty((3, 4), torch.float32, "cpu")
    assert d.data_ptr() == ptr and d.shape == (3, 4) and d.is_contiguous()
    assert pool.empty((4, 3), torch.float32, "cpu").data_ptr() not in (ptr, b.data_ptr(), c.data_ptr())


def test_large_buffers_sit_on_huge_page_boundaries_and_hold_their_values():
    pool = BufferPool()
    shape = (40_000, 16)  # 2.56 MB of float32
    a = pool.empty(shape, torch.float32, "cpu")
    assert a.shape == shape and a.dtype == torch.float32 and a.is_contiguous()
    assert a.data_ptr() % (2 * 2**20) == 0
    x = torch.randn(shape)
    a.copy_(x)
    other = pool.empty(shape, torch.float32, "cpu")
    other.fill_(7.0)
    assert torch.equal(a, x)


def test_at_most_per_shape_buffers_are_kept():
    pool = BufferPool(per_shape=2)
    held = [pool.empty((5,), torch.float64, "cpu") for _ in range(3)]
    ptrs = [t.data_ptr() for t in held]
    del held
    again = [pool.empty((5,), torch.float64, "cpu") for _ in range(2)]
    assert {t.data_ptr() for t in again} == set(ptrs[:2])


def test_copies_and_pickles_start_empty():
    pool = BufferPool(per_shape=3)
    keep = pool.empty((2, 2), torch.float32, "cpu")
    for other in (copy.deepcopy(pool), pickle.loads(pickle.dumps(pool))):
        assert other.per_shape == 3
        assert other.empty((2, 2), torch.float32, "cpu").data_ptr() != keep.data_ptr()
