"""A sparse × dense product whose floats do not depend on the dense operand's width.

Batched fits put many trials' columns side by side in one product and promise each trial the floats of
its own product. PyTorch's CSR product goes to MKL where torch is built with it, and MKL's AVX-512 kernel
rounds a wide product's columns differently from a narrow one's (measured: one ulp on GAP's hop sums,
enough for the classifiers trained on them to part), so the CSR layout cannot keep that promise on every
CPU. PyTorch's own COO kernel adds each output entry's terms one stored entry after another, in the
matrix's entry order, whatever the other columns: the same floats at any width, and the same as
``index_add_`` over the entries in that order.
"""
from __future__ import annotations

import torch


def as_ordered_coo(matrix: torch.Tensor) -> torch.Tensor:
    """`matrix` as the COO form :func:`ordered_spmm` multiplies with (a CSR matrix's entries stay in
    row-major order). Convert once and keep it where a matrix is multiplied many times: the conversion
    costs about as much as a narrow product."""
    return matrix.to_sparse_coo() if matrix.layout == torch.sparse_csr else matrix


def ordered_spmm(matrix: torch.Tensor, dense: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``matrix @ dense`` (into `out` when given: written, never read), each output entry's terms added in
    `matrix`'s entry order (row-major for CSR); `matrix` is sparse CSR or COO."""
    coo = as_ordered_coo(matrix)
    if coo.dtype != dense.dtype:
        coo = coo.to(dense.dtype)
    if out is None:
        return torch.sparse.mm(coo, dense)
    return torch.addmm(out, coo, dense, beta=0, out=out)
