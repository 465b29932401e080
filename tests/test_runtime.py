"""One-thread blocks (:func:`targets.base.one_torch_thread`): inside one, torch and every BLAS library
run on one thread; the caller's settings come back after; and a default run holds one throughout, so
its figures do not follow the machine's thread count."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np
import scipy.linalg  # noqa: F401 - its own BLAS, loaded so that the checks below read it too
import threadpoolctl
import torch

from audit.plan import portfolio
from audit.plan.budget import Budget
from audit.play import game, trial_runner
from canaries import base as canaries
from targets.base import one_torch_thread
from targets.gaussian import GaussianMechanism

SMALL = "csbm:n=120,features=8"


def blas_threads() -> list[int]:
    counts = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    assert counts, "numpy's BLAS should be loaded"
    return counts


@contextlib.contextmanager
def two_threads() -> Iterator[None]:
    """The caller's settings as on a two-core machine with nothing pinned (conftest pins torch to one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def test_a_block_runs_torch_and_blas_on_one_thread_and_restores_the_callers():
    with two_threads():
        assert torch.get_num_threads() == 2 and set(blas_threads()) == {2}
        with one_torch_thread():
            assert torch.get_num_threads() == 1 and set(blas_threads()) == {1}
            np.ones((64, 64)) @ np.ones((64, 64))
        assert torch.get_num_threads() == 2 and set(blas_threads()) == {2}


def test_the_blas_limit_holds_until_the_outer_block_closes():
    """A nested block, and a worker thread's block inside the main thread's (a run's scoring thread):
    closing either leaves the limit in force until the main thread's outer block closes."""
    def worker() -> None:
        with one_torch_thread():
            np.ones((64, 64)) @ np.ones((64, 64))
        seen.append(tuple(blas_threads()))

    seen: list[tuple[int, ...]] = []
    with two_threads():
        with one_torch_thread():
            with one_torch_thread():
                pass
            assert torch.get_num_threads() == 1 and set(blas_threads()) == {1}
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join(10)
            assert seen and set(seen[0]) == {1} and set(blas_threads()) == {1}
        assert torch.get_num_threads() == 2 and set(blas_threads()) == {2}


def test_a_default_run_computes_everything_on_one_thread(tmp_path, monkeypatch):
    """The portfolio's probe release and its pilots' pairs (a worst-case canary's search reads the
    noiseless map) are computed on one thread, as its trials are: on a caller with two, GAP's
    worst-edge pair once followed the machine's thread count (benchmarks/issue46_behaviour.md)."""
    seen: list[tuple[str, int, tuple[int, ...]]] = []

    def recording(name: str):
        method = getattr(GaussianMechanism, name)

        def wrapper(self, *args, **kwargs):
            seen.append((name, torch.get_num_threads(), tuple(blas_threads())))
            return method(self, *args, **kwargs)
        return wrapper

    for name in ("fit", "noiseless"):
        monkeypatch.setattr(GaussianMechanism, name, recording(name))
    spec = game.AuditSpec(target="gaussian", bug="half-noise", epsilon=2.0, dataset=SMALL)
    with two_threads():
        portfolio.run(spec, Budget(trials=400), out=tmp_path, progress=False)
    assert {name for name, _, _ in seen} == {"fit", "noiseless"}
    assert all(torch_n == 1 and set(blas) == {1} for _, torch_n, blas in seen), \
        sorted({(name, torch_n, blas) for name, torch_n, blas in seen})


def test_a_chunk_of_trials_pins_one_thread_where_no_run_block_is_open(monkeypatch):
    """A worker process plays its chunks outside any run's block (jobs > 1): the chunk pins torch
    and BLAS to the setup's one thread itself."""
    seen: list[tuple[int, tuple[int, ...]]] = []
    fit = GaussianMechanism.fit

    def recording(self, *args, **kwargs):
        seen.append((torch.get_num_threads(), tuple(blas_threads())))
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(GaussianMechanism, "fit", recording)
    graph, target, _ = game.setup_run(game.AuditSpec(target="gaussian", dataset=SMALL))
    pair = canaries.make("random-edge").worlds(graph, np.random.default_rng(0), target)
    setup = trial_runner.TrialSetup("gaussian", target.config, pair, graph, "mechanism-lrt", 1, batch=1)
    with two_threads():
        rows = trial_runner.play_chunk(setup, list(range(6)))
    assert len(rows) == 6 and len(seen) == 6
    assert all(torch_n == 1 and set(blas) == {1} for torch_n, blas in seen), seen
