"""Playing trials: each trial's secret bit and seed, batches, chunks and the workers that play them.

Trial i draws its secret bit and its training randomness from (run seed, i) alone
(:func:`secret_bit`, :func:`trial_seed`). A chunk of trials is one worker task (in this process,
loky processes, or a Dask cluster through joblib's dask backend); within a chunk the trials are
grouped by world and fitted ``batch`` at a time. A process builds and prepares the run's target and
attack once and reuses them for the run's later chunks (:func:`worker_objects`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import torch

from attacks import base as attacks
from targets import base as targets
from targets.base import Level

# ---------------------------------------------------------------------------------------------
# seeding
# ---------------------------------------------------------------------------------------------
def secret_bit(seed: int, index: int) -> int:
    """Balanced in pairs: trials 2j, 2j+1 take opposite bits, ordered by a coin from (seed, j)."""
    coin = int(np.random.SeedSequence([seed, index // 2, 0xB17]).generate_state(1)[0]) & 1
    return (index & 1) ^ coin


def trial_seed(seed: int, index: int) -> int:
    a, b = np.random.SeedSequence([seed, index, 0x5EED]).generate_state(2)
    return (int(a) << 31 ^ int(b)) & ((1 << 63) - 1)


# ---------------------------------------------------------------------------------------------
# playing trials
# ---------------------------------------------------------------------------------------------
#: trials per fit_batch call when the spec says auto (0) and the target vectorises its fit. On CPU
#: a mechanism-level batch's working set should stay near the caches (measured on Cora: 64 is
#: slower than 16); trials that train a model (api, weights, trace views) gain from wider stacks
#: (GAP's classifiers on Cora: 64 per world ≈ 4× a loop of fits).
AUTO_BATCH = 16
AUTO_BATCH_TRAINING = 64
AUTO_BATCH_CUDA = 64


def batch_size(spec_batch: int, target: targets.Target, level: Level = Level.MECHANISM) -> int:
    """The batch size a run uses: the spec's, or auto (0): for a vectorised target AUTO_BATCH (or
    the target's ``auto_batch``) on the mechanism view, AUTO_BATCH_TRAINING on views that need the
    trained model, AUTO_BATCH_CUDA on CUDA; 1 for a target without ``fit_batch``."""
    if spec_batch:
        return spec_batch
    if not target.batched:
        return 1
    if target.device.type == "cuda":
        return AUTO_BATCH_CUDA
    if level != Level.MECHANISM:
        return AUTO_BATCH_TRAINING
    return target.auto_batch or AUTO_BATCH


def cached_work(target: targets.Target) -> str | None:
    """The target's one-line description of its per-worker cached work."""
    return target.cached_work()


@dataclass
class TrialSetup:
    """What a worker needs to play trials (picklable).

    ``batch``: trials per :meth:`Target.fit_batch` call (1: one :meth:`Target.fit` per trial).
    ``pipeline``: score batch k in a worker thread while batch k+1 trains (None: on iff the target
    runs on CUDA or says ``score_alongside``).
    """

    target_cls: str
    config: Any
    pair: Any
    graph: Any
    attack: str
    seed: int
    threads: int = 1
    batch: int = 1
    pipeline: bool | None = None
    token: str = ""  # names the run: a process's later chunks of it reuse its target and attack
    #: reuse one target per (class, config) across runs in this process (the portfolio's pilots and
    #: certification: a target's per-world caches, e.g. a trained encoder, then serve every run)
    share_target: bool = False
    #: the run's own seed (``seed`` is its trial stream's): what an attack drawing releases of its own
    #: derives them from, so a pilot and the certification of one run share them (None: ``seed``)
    run_seed: int | None = None


#: this process's target and attack of the run it plays, by ``TrialSetup.token`` (one run at a time):
#: a run's later chunks reuse them, and the per-world work they cache, instead of rebuilding them
_WORKER: dict[str, tuple[Any, Any]] = {}


def release_worker(token: str) -> None:
    """Drop this process's target and attack of the run named `token` (the run has ended)."""
    _WORKER.pop(token, None)


def held_workers() -> list[str]:
    """The runs whose target and attack this process still holds."""
    return list(_WORKER)


def worker_objects(setup: TrialSetup) -> tuple[targets.Target, Any]:
    """(target, attack) for `setup`, built and prepared once per run and process. Reuse cannot
    change a trial's floats: every cache a target or attack keeps is keyed by (and checks the
    identity of) the graphs it was computed from, and a trial draws only from its own generator."""
    hit = _WORKER.get(setup.token) if setup.token else None
    if hit is None:
        target = shared_target(setup.target_cls, setup.config) if setup.share_target \
            else targets.get(setup.target_cls)(setup.config)
        attack = attacks.make(setup.attack)
        attack.bind_target(target)  # shadow-model attacks train copies of the target (never on trials)
        attack.bind_run(setup.seed if setup.run_seed is None else setup.run_seed)
        hit = (target, attack)
        if setup.token:
            _WORKER.clear()
            _WORKER[setup.token] = hit
    hit[0].prepare(setup.graph)  # every chunk: a worker process unpickles a new graph object per chunk
    return hit


#: this process's targets shared across runs (:attr:`TrialSetup.share_target`), by (class, config)
_SHARED: dict[tuple[str, str], targets.Target] = {}
#: the most targets :data:`_SHARED` holds (the oldest is dropped first)
SHARED_MAX = 4


def shared_target(target_cls: str, config: Any) -> targets.Target:
    """One target per (class, config) in this process, reused by every run that shares it. As for a
    run's later chunks (:func:`worker_objects`), reuse cannot change a trial's floats: a target's
    caches are keyed by what they were computed from, and a trial draws only from its own generator."""
    key = (target_cls, repr(config))
    if key not in _SHARED:
        while len(_SHARED) >= SHARED_MAX:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[key] = targets.get(target_cls)(config)
    return _SHARED[key]


def release_shared() -> None:
    """Drop every shared target (the runs that shared them have ended)."""
    _SHARED.clear()


def world_batches(setup: TrialSetup, bits: dict[int, int]) -> list[tuple[int, list[int]]]:
    """The chunk's trials (index → secret bit) by world, in sub-batches of ``setup.batch``; a last
    sub-batch of fewer than half of that joins the one before it (a small stack costs more per
    trial, and its thread groups leave cores idle)."""
    size = max(1, setup.batch)
    out = []
    for bit in (0, 1):
        mine = [i for i, b in bits.items() if b == bit]
        subs = [mine[k:k + size] for k in range(0, len(mine), size)]
        if len(subs) > 1 and 2 * len(subs[-1]) < size:
            subs[-2:] = [subs[-2] + subs[-1]]
        out += [(bit, sub) for sub in subs]
    return out


def _score(setup: TrialSetup, attack: Any, releases: list[Any]) -> list[float]:
    if len(releases) > 1:
        scores = attack.score_batch(releases, setup.pair, setup.graph)
    else:
        scores = [attack.score(r, setup.pair, setup.graph) for r in releases]
    return [float(x) for x in scores]


def play_chunk(setup: TrialSetup, indices: list[int]) -> list[tuple[int, int, float]]:
    """Play the given trials; returns (index, bit, score) for each, in the order of `indices`.

    Trials are grouped by world and trained ``setup.batch`` at a time (``fit`` when 1, else
    ``fit_batch``), trial i always with its own generator from (seed, i); scores come from the
    attack's ``score_batch`` where it has one. On CUDA, for a target whose ``score_alongside`` is
    true, or when ``setup.pipeline`` says so, the scoring of one batch runs in a worker thread
    while the next batch trains.
    """
    if setup.threads:  # in a worker process too, where no run's block is open
        targets.pin_threads(setup.threads)
    target, attack = worker_objects(setup)

    def fit(bit: int, batch: list[int]) -> list[Any]:
        world = setup.pair.world(bit)
        rngs = [torch.Generator().manual_seed(trial_seed(setup.seed, i)) for i in batch]
        if setup.batch == 1:
            return [targets.check_release(target.fit(world, rng), target) for rng in rngs]
        releases = [targets.check_release(r, target) for r in target.fit_batch(world, rngs)]
        if len(releases) != len(rngs):
            raise RuntimeError(f"{type(target).__name__}.fit_batch returned {len(releases)} releases for "
                               f"{len(rngs)} generators")
        return releases

    pipeline = setup.pipeline
    if pipeline is None:
        pipeline = target.device.type == "cuda" or target.score_alongside
    scores: dict[int, float] = {}
    bits = {i: secret_bit(setup.seed, i) for i in indices}
    work = world_batches(setup, bits)
    if not pipeline:
        for bit, batch in work:
            scores.update(zip(batch, _score(setup, attack, fit(bit, batch))))
    else:
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        pending: deque = deque()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-score") as pool:
            for bit, batch in work:
                releases = fit(bit, batch)
                while len(pending) >= 2:  # bounded: at most two batches of releases wait for scoring
                    done_batch, future = pending.popleft()
                    scores.update(zip(done_batch, future.result()))
                pending.append((batch, pool.submit(_score, setup, attack, releases)))
            for done_batch, future in pending:
                scores.update(zip(done_batch, future.result()))
    rows = []
    for i in indices:
        if not math.isfinite(scores[i]):
            raise RuntimeError(f"attack {setup.attack!r} returned a non-finite score at trial {i}")
        rows.append((i, bits[i], scores[i]))
    return rows


def chunk_indices(indices: list[int], jobs: int, max_chunk: int = 100) -> list[list[int]]:
    """Chunks of trials (one worker task each), about 4 per job, at most `max_chunk` trials."""
    if not indices:
        return []
    size = max(1, min(max_chunk, math.ceil(len(indices) / (4 * max(jobs, 1)))))
    return [indices[k:k + size] for k in range(0, len(indices), size)]


def play_chunks(setup: TrialSetup, chunks: list[list[int]], jobs: int, backend: str, scheduler: str | None
             ) -> Iterator[list[tuple[int, int, float]]]:
    if jobs == 1 and backend == "loky":
        for c in chunks:
            yield play_chunk(setup, c)
        return
    from joblib import Parallel, delayed, parallel_config

    if backend == "dask":
        try:
            from dask.distributed import Client
        except ImportError:
            raise ValueError("the dask backend needs dask[distributed]: pip install 'dpgnn-audit[dask]'") from None
        client = Client(scheduler) if scheduler else Client(processes=False)
        try:
            with parallel_config(backend="dask"):
                yield from Parallel(n_jobs=-1, return_as="generator_unordered")(
                    delayed(play_chunk)(setup, c) for c in chunks)
        finally:
            client.close()
        return
    if backend != "loky":
        raise ValueError(f"backend must be 'loky' or 'dask', got {backend!r}")
    yield from Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")(
        delayed(play_chunk)(setup, c) for c in chunks)
