"""Where and how a target runs: its device, seeded randomness, one-thread blocks, and the split
accuracies of a trained classifier (re-exported by :mod:`targets.base`)."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import threadpoolctl
import torch


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA device is available")
    return torch.device(device)


#: torch's global RNG is process-wide: a block that seeds it must not interleave with another
#: thread's (the game scores batch k in a worker thread while batch k+1 trains).
GLOBAL_RNG_LOCK = threading.RLock()


@contextlib.contextmanager
def seeded(rng: torch.Generator) -> Iterator[None]:
    """Run a block with torch's global RNG seeded from `rng` (for nn.Module initialisation).

    Holds :data:`GLOBAL_RNG_LOCK` for the block, so threads never share the seeded stream.
    """
    seed = int(torch.randint(0, 2**62, (1,), generator=rng).item())
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


#: per thread: how many :func:`one_torch_thread` blocks are open, and the BLAS limits its outermost set
_BLAS_HOLD = threading.local()


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run a block on one thread: one intra-op torch thread, and one thread in every BLAS library the
    process has loaded (numpy's and scipy's OpenBLAS or MKL, through threadpoolctl). A parallel
    kernel splits its range by the size of its input and a threaded BLAS sums in the order its
    threads split the work, so one thread keeps a run's floats independent of what it is stacked
    with and of the machine's thread count (``OMP_NUM_THREADS``). The caller's settings are restored
    after. The BLAS limits are set and restored by a thread's outermost block (nested blocks cost
    nothing more); a pthreads OpenBLAS has one process-wide pool, which threadpoolctl lets only one
    thread limit at a time, so a worker thread's block inside the main thread's keeps its limit."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    depth = getattr(_BLAS_HOLD, "depth", 0)
    if depth == 0:  # scanning the loaded libraries costs ~1 ms: the outermost block only
        import scipy.linalg  # noqa: F401 - scipy's own BLAS, loaded now so that it is limited too
        _BLAS_HOLD.limits = threadpoolctl.threadpool_limits(limits=1, user_api="blas")
    _BLAS_HOLD.depth = depth + 1
    try:
        yield
    finally:
        _BLAS_HOLD.depth = depth
        if depth == 0:
            _BLAS_HOLD.limits.restore_original_limits()
            _BLAS_HOLD.limits = None
        torch.set_num_threads(before)


def pin_threads(n: int) -> None:
    """Set torch's intra-op threads and every loaded BLAS's to `n`, not restored: what a worker
    process's trials run on (in process, the run's :func:`one_torch_thread` restores the caller's)."""
    import scipy.linalg  # noqa: F401 - as in one_torch_thread
    torch.set_num_threads(n)
    threadpoolctl.threadpool_limits(limits=n, user_api="blas")


def split_accuracies(pred: torch.Tensor, graph: Any) -> dict[str, float]:
    """Accuracy of the predicted classes `pred` (one per node, CPU) on the graph's train, val and
    test masks (NaN for an empty mask)."""
    y = graph.y.cpu()
    masks = {split: getattr(graph, f"{split}_mask").cpu() for split in ("train", "val", "test")}
    return {split: float((pred[mk] == y[mk]).float().mean()) if mk.any() else float("nan")
            for split, mk in masks.items()}


def child_generator(rng: torch.Generator, device: torch.device | str = "cpu") -> torch.Generator:
    """A new generator on `device`, seeded from `rng`."""
    seed = int(torch.randint(0, 2**62, (1,), generator=rng).item())
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def noise_generator(rng: torch.Generator, device: torch.device | str) -> torch.Generator:
    """The generator a trial draws its mechanism noise from on `device`.

    On the CPU, `rng` itself (the floats of a CPU run never change). On an accelerator, a Philox
    generator on that device seeded from one draw of `rng` (:func:`child_generator`), so the noise
    is drawn where it is used, never copied from the host, and is still a function of (run seed,
    trial index) alone: a trial's draws do not depend on ``--batch``, ``--jobs`` or the backend.
    A CUDA run's noise is therefore another (equally distributed) stream than a CPU run's."""
    if torch.device(device).type == "cpu":
        return rng
    return child_generator(rng, device)


def shuffled_batches(rows: torch.Tensor, size: int, rng: torch.Generator) -> list[torch.Tensor]:
    """`rows` in a random order, cut into batches of `size`; a last batch of one row joins the one before.

    A one-row batch cannot be trained on with BatchNorm in training mode (its per-channel variance is
    undefined), and ``N mod size == 1`` happens for ordinary sizes (179 of 180 training nodes).
    """
    perm = torch.randperm(rows.numel(), generator=rng).to(rows.device)
    batches = list(rows[perm].split(size))
    if len(batches) > 1 and batches[-1].numel() == 1:
        batches[-2:] = [torch.cat(batches[-2:])]
    return batches
