"""targets.common.stacked_mlp.linear: K runs' layers in one product, each run's floats those of F.linear."""
import pytest
import torch
import torch.nn.functional as F

from targets.base import one_torch_thread
from targets.common.stacked_mlp import linear


@pytest.mark.parametrize("runs, rows, fan_in, fan_out", [(1, 140, 128, 7), (3, 140, 128, 7), (16, 600, 64, 6),
                                                         (3, 37, 24, 3), (4, 1000, 32, 128), (2, 64, 16, 2)])
def test_forward_and_gradients_are_each_runs_f_linear(runs, rows, fan_in, fan_out):
    with one_torch_thread():  # as the stacks run
        gen = torch.Generator().manual_seed(rows + fan_out)
        x, w, b = (torch.randn(runs, *shape, generator=gen) for shape in ((rows, fan_in), (fan_out, fan_in), (fan_out,)))
        grad_out = torch.randn(runs, rows, fan_out, generator=gen)
        xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
        out = linear(xs, ws, bs)
        out.backward(grad_out)
        for k in range(runs):
            xk, wk, bk = (t[k].clone().requires_grad_() for t in (x, w, b))
            ref = F.linear(xk, wk, bk)
            ref.backward(grad_out[k])
            assert torch.equal(out[k], ref)
            assert torch.equal(xs.grad[k], xk.grad)
            assert torch.equal(ws.grad[k], wk.grad)  # the narrow heads (fan_out 2-7) once differed here
            assert torch.equal(bs.grad[k], bk.grad)


def test_only_the_gradients_asked_for_are_formed():
    x = torch.randn(2, 5, 4)
    w = torch.randn(2, 3, 4, requires_grad=True)
    b = torch.randn(2, 3)
    linear(x, w, b).sum().backward()
    assert x.grad is None and b.grad is None and w.grad.shape == w.shape
