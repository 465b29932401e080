"""The audit game: challenger, secret bits, parallel trials, and the result.

A run fixes a target (from a target ε), a dataset, a canary (two neighbouring worlds, chosen once
per run from the run seed and the target's *noiseless* map, never from trial outcomes) and an
attack. Trial i draws its secret bit and its training randomness from (run seed, i) alone, so
trials can run in any order, on any worker, and a rerun of the same spec resumes.

Bits are balanced in pairs: trials 2j and 2j+1 take opposite bits, in an order set by a coin for
pair j. Trials run in chunks (:mod:`audit.play.trial_runner`: in this process, loky processes, or a Dask cluster
through joblib's dask backend); a process prepares the run's target once and reuses it for the
run's later chunks. ``--mode one-run`` is played by :mod:`audit.play.one_run_audit`.
"""
from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks import base as attacks
from audit.declared_model import declared
from audit.stats import pair_epsilon
from audit.play import memory_plan, relation, sequential_run
from audit.records import provenance
from audit.play.shared_setup import SharedSetup, once
from audit.play.trial_runner import (TrialSetup, batch_size, cached_work, chunk_indices, play_chunks, release_worker,
                                shared_target, worker_objects)
from audit.play.trial_runner import trial_seed
from audit.records.result import Result, readable_name
from audit.play.run_outcome import make_result, save_result
from audit.play.run_spec import AuditSpec, RunSetup, build_target, setup_run, stream_seed
from audit.play.estimation import (declared_record, estimate, family_estimate, measure_node_scales, measure_sampler,
                                   node_estimate, plan_estimator)
from audit.play.sequential_run import worlds
from audit.play.trial_sizing import BUDGET_CAP, BUDGET_FLOOR, BUDGET_MARGIN, auto_trials  # noqa: F401 -- their old home
from audit.records.store import Store, run_key
from audit.records.log import get as _logger
from canaries import base as canaries
from targets import base as targets
from targets.base import Level
from audit.stats.kinds import AUTO, Mode

log = _logger(__name__)

# ---------------------------------------------------------------------------------------------
# running an audit
# ---------------------------------------------------------------------------------------------
def run_audit(spec: AuditSpec, *, out: str | Path = "results", jobs: int = 1, backend: str = "loky",
              scheduler: str | None = None, progress: bool = True,
              on_chunk: Callable[[int], None] | None = None, pipeline: bool | None = None,
              fresh: bool = False, sequential: bool = False, setup: RunSetup | None = None,
              shared: SharedSetup | None = None, exact: bool = True, family: bool | int = False,
              save: bool = True, fp_fraction: float | None = None, node_check: int = 0) -> Result:
    """Play (or resume) the games of `spec`, estimate, and write the result. Returns the result.

    Stored trials are reused only for the same options and the same code (:func:`audit.records.store.run_key`);
    `fresh` forgets them first. `pipeline`: overlap training and scoring (see :func:`play_chunk`);
    None = on iff CUDA. `sequential`: stop as soon as the verdict is settled (:mod:`audit.play.sequential_run`);
    ``spec.trials`` is then the most it plays. `setup`: :func:`setup_run` of `spec` where the caller
    built it already (under :func:`targets.one_torch_thread`, as the run would), so it is built once.
    `shared`: a setup shared with other runs of the same target (:mod:`audit.play.shared_setup`, the
    portfolio's pilots): its pairs, checks and targets are built once for them all.
    `exact`: compute the exact ε of the played pair (:mod:`audit.stats.pair_epsilon`); a pilot, which is
    never reported, says "not computed" instead. `family`: certify with the subsampled-Gaussian family
    fit where the sampler checks pass, cp beside it (:mod:`audit.stats.family_fit`; fixed budget, not sequential);
    an int is the number of releases the sampler checks read (True: :data:`audit.stats.family_fit.SAMPLER_RELEASES`).
    `save`: write the result to the store and as ``out/<run_id>.json``; a pilot's result is kept inside
    its run's result instead (:func:`audit.plan.portfolio.run`), its trials stay in the store.
    `fp_fraction`: where the run's estimator is cp, its one test at this OUT false-positive share, fixed
    before any trial (:func:`audit.stats.pair_prior.prior_fraction`; fixed budget, not sequential).
    `node_check`: with `fp_fraction`, on a whole-node pair, the number of releases the k_t check reads before any
    trial; where it passes, the whole-node fit at that share certifies, cp at it beside (:mod:`audit.stats.node_family`).

    The whole run uses one torch thread, as its trials always did (``TrialSetup.threads``); the
    caller's setting is restored after. The canary probe, the declared-model check and the setup
    are many small ops: on two loaded cores a second intra-op thread made GAP's probe cost 4.5×
    the CPU (benchmarks/throughput.md, "GAP's default run").
    """
    with targets.one_torch_thread():
        return _run_audit(spec, out=out, jobs=jobs, backend=backend, scheduler=scheduler, progress=progress,
                          on_chunk=on_chunk, pipeline=pipeline, fresh=fresh, sequential=sequential,
                          setup=shared.setup if shared is not None else setup, shared=shared, exact=exact,
                          family=family, save=save, fp_fraction=fp_fraction, node_check=node_check)


def charged_pair(canary: Any, spec: AuditSpec, graph: Any, target: targets.Target, claim: targets.Claim
                 ) -> tuple[Any, targets.Target, targets.Claim, dict[str, Any]]:
    """The canary's pair of worlds on `graph` (from the seed's pair stream), and the target and claim
    charged at the pair's worse world where the calibration reads a quantity of the private data
    (:func:`audit.play.relation.charge`), with the charge's record."""
    pair = canary.worlds(graph, np.random.default_rng([spec.seed, 0xCA4A]), targets.on_cpu(target))
    return pair, *relation.charge(build_target(spec), pair, target, claim)


@dataclass
class PlayedOn:
    """What a spec's ``auto`` canary and witness resolve to: the spec the trials play (its target,
    parameters and dataset the witness's where one plays), the canary's name and its pair, the
    target and claim charged at the pair's worse world, and the charge's record."""

    spec: AuditSpec
    target_cls: str
    canary: str
    choice: Any
    graph: Any
    target: targets.Target
    claim: targets.Claim
    pair: Any
    charge: dict[str, Any]


def resolve_pair(spec: AuditSpec, attack_name: str, level: Level, setup: RunSetup, *,
                 shared: SharedSetup | None = None, out: str | Path = "results") -> PlayedOn:
    """The pair `spec` plays for `attack_name` at `level` (through `shared`'s memo, so a run on it builds
    nothing twice): two specs with the same attack, view and trial stream that resolve to one pair
    play the same trials."""
    graph, target, claim = setup
    canary_name = once(shared, ("auto-canary", attack_name), lambda: canaries.auto_canary(target, graph, attack_name)) \
        if spec.canary == AUTO else spec.canary
    target_cls, choice, run_spec = spec.target, None, spec
    if spec.canary == AUTO and level in (Level.MECHANISM, Level.TRACE):
        # the probe's witness where the target takes it and it beats the given graph (audit.play.witness_choice)
        from audit.play import witness_choice

        # on the CPU whatever the run's device: the canary is public and the same for every device
        choice = once(shared, ("witness", level), lambda: witness_choice.choose(
            build_target(replace(spec, device="cpu")), graph, level=level, dataset=spec.dataset, out=out,
            params=spec.params))
        if choice.play:
            target_cls, canary_name = choice.target_name, choice.canary
            run_spec = replace(spec, target=target_cls, params=choice.params, dataset=choice.dataset)
            graph, target, claim = once(shared, ("setup", run_spec.setup_key()), lambda: setup_run(run_spec))
    canary = canaries.make(canary_name)
    pair, target, claim, charge_record = once(shared, ("pair", run_spec.setup_key(), canary_name),
                                              lambda: charged_pair(canary, run_spec, graph, target, claim))
    return PlayedOn(run_spec, target_cls, canary_name, choice, graph, target, claim, pair, charge_record)


#: one chunk of played games: (trial index, secret bit, score) rows
Rows = list[tuple[int, int, float]]


@dataclass
class Game:
    """A run ready to play: what its trials play on (:class:`PlayedOn`), the attack and view, the store
    and run key its trials are kept under, the trials still to play, and the workers' setup.
    :meth:`trials` yields the games as they are played; the store, the progress bar and the caller's
    ``on_chunk`` consume them (:func:`_run_audit`), and the report reads them back from the store."""

    spec: AuditSpec
    played_on: PlayedOn
    attack_name: str
    attack: Any
    level: Level
    store: Store
    key: str
    code: dict[str, Any]
    todo: set[int]
    setup: TrialSetup
    shared: SharedSetup | None
    sampler: Any = None
    node_scales: Any = None
    played: int = 0

    def trials(self, indices: list[int], jobs: int, backend: str, scheduler: str | None) -> Iterator[Rows]:
        """The games of those of `indices` not stored yet, a chunk at a time as the workers finish them."""
        wanted = sorted(self.todo & set(indices))
        chunks = chunk_indices(wanted, jobs, max_chunk=max(100, 2 * self.setup.batch))
        yield from play_chunks(self.setup, chunks, jobs, backend, scheduler)

    def keep(self, rows: Rows) -> None:
        """The store's consumer: keep `rows` (a run interrupted after it resumes from them)."""
        self.store.add_trials(self.key, rows)
        self.todo.difference_update(i for i, _, _ in rows)
        self.played += len(rows)

    def checked(self) -> declared.DeclaredCheck | None:
        """The declared-model check of the played pair at this view (None off the mechanism and trace
        views): the exact LLR, its threshold 0 and gdp rest on the target's declared noise model, so it
        is tested on held-out releases, fitted `batch` at a time as the trials hold them."""
        if self.level not in (Level.MECHANISM, Level.TRACE):
            return None
        on = self.played_on
        return once(self.shared, ("declared", on.spec.setup_key(), on.canary, self.level, tuple(self.attack.levels)),
                    lambda: declared.check_declared(on.target, on.pair, seed=self.spec.seed, attack=self.attack,
                                                    graph=on.graph, n=DECLARED_CHECK_N, chunk=self.setup.batch))


def _prepare(spec: AuditSpec, *, out: Path, jobs: int, pipeline: bool | None, fresh: bool, sequential: bool,
             setup: RunSetup | None, shared: SharedSetup | None, family: bool | int, progress: bool,
             node_check: int = 0) -> Game:
    """Everything before the first trial: the attack, view and pair, the charge, the sampler checks, the
    store's key and what it already holds, and the workers' setup (batched to fit the free memory)."""
    graph, target, claim = setup or setup_run(spec)
    attack_name = attacks.auto_attack(target, graph) if spec.attack == AUTO else spec.attack
    attack = attacks.make(attack_name)
    level = attack.levels[0] if spec.level == AUTO else spec.level
    if level not in target.levels:
        raise ValueError(f"target {target.name!r} offers no {level!r} view; it offers {', '.join(target.levels)}")
    if level not in attack.levels:
        raise ValueError(f"attack {attack_name!r} works on {', '.join(attack.levels)}, not {level!r}")
    played_on = resolve_pair(spec, attack_name, level, (graph, target, claim), shared=shared, out=out)
    pair = played_on.pair
    pair.info["relation_charge"] = dict(played_on.charge)
    if played_on.choice is not None:
        pair.info["input_choice"] = played_on.choice.record
    target = played_on.target
    if shared is not None:  # one target per config in this process: its per-world caches serve every run
        target = played_on.target = shared_target(played_on.target_cls, target.config)
    sampler = measure_sampler(spec, target, pair, family) if family else None
    node_scales = measure_node_scales(spec, target, pair, node_check) if node_check else None

    store = Store(out / "audit.sqlite")
    code = provenance.code_identity(type(target), type(attack), type(canaries.make(played_on.canary)))
    key = run_key(spec.key(), code["key"])
    todo = _resume(store, key, spec, code, fresh=fresh, quiet=sequential)
    batch = batch_size(spec.batch, target, level)
    trial_setup = TrialSetup(played_on.target_cls, target.config, pair, played_on.graph, attack_name,
                             stream_seed(spec), batch=batch, pipeline=pipeline, share_target=shared is not None,
                             run_seed=spec.seed, token=f"{key}:{os.getpid()}:{time.time_ns()}")
    if spec.batch == 0 and level == Level.MECHANISM and batch > 1 and todo:  # --batch auto: fit the free memory
        memory = memory_plan.plan(worker_objects(trial_setup)[0], pair.world(1), batch, jobs)
        trial_setup.batch = memory.batch
        if progress:
            log.info(memory.line(jobs))
    return Game(spec, played_on, attack_name, attack, level, store, key, code, todo, trial_setup, shared, sampler,
                node_scales)


def _run_audit(spec: AuditSpec, *, out: str | Path, jobs: int, backend: str, scheduler: str | None,
               progress: bool, on_chunk: Callable[[int], None] | None, pipeline: bool | None, fresh: bool,
               sequential: bool, setup: RunSetup | None, shared: SharedSetup | None = None,
               exact: bool = True, family: bool | int = False, save: bool = True,
               fp_fraction: float | None = None, node_check: int = 0) -> Result:
    if spec.mode == Mode.ONE_RUN:
        from audit.play.one_run_audit import run_one_run  # it builds on this module's setup and result

        return run_one_run(spec, out=out, progress=progress, setup=setup)
    if family and sequential:
        raise ValueError("the subsampled-Gaussian family fit certifies a fixed budget, not a sequential run")
    if fp_fraction is not None and sequential:
        raise ValueError("cp at an a-priori false-positive share certifies a fixed budget, not a sequential run")
    if node_check and fp_fraction is None:
        raise ValueError("the whole-node fit certifies at an a-priori false-positive share: give fp_fraction")
    t0 = time.time()
    out = Path(out)
    game = _prepare(spec, out=out, jobs=jobs, pipeline=pipeline, fresh=fresh, sequential=sequential, setup=setup,
                    shared=shared, family=family, progress=progress, node_check=node_check)
    consumers: list[Callable[[Rows], None]] = [game.keep]
    bar = None
    if progress and game.todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=spec.trials, initial=spec.trials - len(game.todo),
                   desc=_progress_label(spec, game.played_on.canary, game.attack_name), unit="trial",
                   file=sys.stderr, dynamic_ncols=True)
        consumers.append(lambda rows: bar.update(len(rows)))
    if on_chunk is not None:
        consumers.append(lambda rows: on_chunk(len(rows)))

    def play(indices: list[int]) -> None:
        """Play those of `indices` not in the store yet, each chunk to every consumer."""
        for rows in game.trials(indices, jobs, backend, scheduler):
            for consume in consumers:
                consume(rows)

    claim, pair = game.played_on.claim, game.played_on.pair
    probe = functools.cache(lambda: _probe(spec, game.played_on.target, pair) if game.attack.reads_probe else None)
    t_trials = time.time()
    seq, why_not = None, ""
    try:
        if sequential:
            check = game.checked()
            plan = plan_estimator(spec, claim, game.attack, probe, pair, check)
            seq, why_not = sequential_run.run(spec, claim, plan, play, lambda hi: game.store.trials(game.key, limit=hi))
        if seq is None:
            play(list(range(spec.trials)))
    finally:
        release_worker(game.setup.token)
        if bar is not None:
            bar.close()
    trials_wall = time.time() - t_trials
    family_record = None
    if seq is None:
        rows = game.store.trials(game.key, limit=spec.trials)
        if not sequential:
            check = game.checked()
        est, why, policy = estimate(spec, claim, game.attack, probe, pair, check, *worlds(rows), fp_fraction=fp_fraction)
        record: dict[str, Any] = {"on": False, **({"why_not": why_not} if sequential else {})}
        if family:
            est, why, family_record = family_estimate(spec, claim, game.sampler, rows, est, why)
        elif game.node_scales is not None:
            est, why, family_record = node_estimate(spec, claim, game.node_scales, rows, est, why, fp_fraction)
    else:
        rows, est, why, policy, record = seq.rows, seq.estimate, seq.why, seq.policy, seq.record
    result = _conclude(game, rows, est, why, policy, record, check, seq, exact=exact, wall=time.time() - t0,
                       trials_wall=trials_wall, family_record=family_record)
    if save:
        save_result(game.store, out, result)
    else:
        game.store.close()
    return result


def _conclude(game: Game, rows: Rows, est: Any, why: str, policy: Any, record: dict[str, Any],
              check: declared.DeclaredCheck | None, seq: Any, *, exact: bool, wall: float, trials_wall: float,
              family_record: dict[str, Any] | None) -> Result:
    """The run's result from its rows and estimate: the played pair's exact ε on this view (the exact
    LLR's own trials are its loss samples), the records, and the relation's readings."""
    spec, on, level = game.spec, game.played_on, game.level
    target, claim, pair = on.target, on.claim, on.pair
    bits = np.array([b for _, b, _ in rows])
    scores = np.array([s for _, _, s in rows])
    used = len(rows)
    pair_exact = pair_epsilon.of_run(
        target, pair, level=level, delta=claim.delta, confidence=spec.confidence, seed=spec.seed,
        declared_ok=pair_epsilon.declared_state(check),
        trial_losses=(-scores[bits == 0], scores[bits == 1]) if game.attack.exact_loss else None,
        mc_releases=max(pair_epsilon.CHECK_RELEASES, used // 2)  # what a Monte Carlo may cost: the trials' own
    ) if exact else pair_epsilon.not_computable(claim.delta, "a pilot: not computed (the certified run computes it)")
    run_id = f"{readable_name(spec.target)}-{game.key}-{spec.trials}-{est.method}" \
        + (f"-seq{used}" if seq is not None else "")
    result = make_result(spec, game.key, target, claim, pair.info, game.attack_name, level, est, scores, bits,
                         wall=wall, store_path=game.store.path,
                         attack_queries=game.attack.queries_for(pair), run_id=run_id, batch=game.setup.batch,
                         cached_per_worker=cached_work(target), trials_played=game.played,
                         trials_wall_s=trials_wall, code=game.code, reused_trials=used - game.played,
                         declared=declared_record(check, policy, est, scores, bits), estimator_choice=why,
                         sequential=record, exact=pair_exact)
    if seq is not None:
        result = result.replace(confidence=spec.confidence)  # the looks' levels add up to it (record)
        if result.verdict != seq.verdict:
            raise AssertionError(f"sequential decision {seq.verdict} but the estimate reads {result.verdict}")
    if family_record is not None:
        result = result.replace(extra={**result.extra, "family_fit": family_record})
    relation.record_readings(result)
    return result


#: held-out releases per world for the declared-model check (8 catches every deviant of
#: tests/deviants.py; the check's false-alarm level is 1e-3 overall)
DECLARED_CHECK_N = 8


def _resume(store: Store, key: str, spec: AuditSpec, code: dict[str, Any], *, fresh: bool,
            quiet: bool = False) -> set[int]:
    """The trial indices (below the budget) still to play; says what it reuses (``fresh``: forget
    stored trials; ``quiet``: say nothing, for a sequential run that may use only some of them)."""
    if fresh:
        store.forget(key)
    store.begin(key, {**asdict(spec), "code": code})
    done = store.done(key)
    reused = sum(1 for i in done if i < spec.trials)
    if reused and not quiet:
        created = store.created(key)
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) if created else "?"
        log.info(f"reusing {reused:,} of {spec.trials:,} trials stored on {when} by {provenance.describe(code)} "
                 f"(--fresh to replay them)")
    return {i for i in range(spec.trials) if i not in done}


def _progress_label(spec: AuditSpec, canary: str, attack: str) -> str:
    """``audit gap ε=1 [worst-edge, mechanism-lrt, bug=…, k=v]``: enough to tell two runs apart."""
    extra = ([f"bug={spec.bug}"] if spec.bug else []) + [f"{k}={v}" for k, v in sorted(spec.params.items())]
    return f"audit {spec.target} ε={spec.epsilon:g} [{', '.join([canary, attack, *extra])}]"


def _probe(spec: AuditSpec, target: targets.Target, pair: Any) -> targets.Release:
    """One release of world 0 drawn apart from every trial's randomness (for a-priori choices)."""
    return targets.check_release(target.fit(pair.g0, torch.Generator().manual_seed(trial_seed(spec.seed, 2**40))),
                                 target)
