"""One-run mode (``run --mode one-run``): many canary edges in one training run, a score per canary
(Steinke, Nasr & Jagielski 2023), with the f-DP reading of the same guesses beside it."""
from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks import base as attacks
from audit.stats import estimators
from audit.records import provenance
from audit.stats.pair_epsilon import not_computable
from audit.play.run_outcome import make_result, save_result
from audit.play.run_spec import AuditSpec, RunSetup, setup_run
from audit.records.result import Result, readable_name
from audit.records.store import Store, run_key
from audit.play.trial_runner import trial_seed
from canaries import base as canaries
from canaries.spread import interacting
from graphs.ops import add_edge
from targets import base as targets
from audit.stats.kinds import AUTO


def run_one_run(spec: AuditSpec, *, out: str | Path = "results", progress: bool = True,
                setup: RunSetup | None = None) -> Result:
    """One-run audit (Steinke, Nasr & Jagielski 2023): ``spec.trials`` canary edges, each inserted
    with probability ½ (bits from the run seed), ONE training run, a score per canary.

    Canary i is scored against the base graph (without / with its own edge), never using the
    other canaries' bits: the guesses must depend on the release alone. Canary edges share no
    endpoint, so one canary barely moves another's rows. `setup`: as :func:`audit.play.game.run_audit`'s.
    """
    t0 = time.time()
    graph, target, claim = setup or setup_run(spec)
    if target.unit is not targets.Unit.EDGE:
        raise ValueError("--mode one-run supports edge-level targets in this version")
    attack_name = attacks.auto_attack(target, graph) if spec.attack == AUTO else spec.attack
    attack = attacks.make(attack_name)
    canary = canaries.make("random-edge" if spec.canary in ("auto", "worst-edge") else spec.canary)
    rng = np.random.default_rng([spec.seed, 0x0123])
    hops = target.receptive_hops
    pairs = canary.many(graph, spec.trials, rng, hops=hops)
    bits = rng.integers(0, 2, size=len(pairs))
    world = graph
    for pair, b in zip(pairs, bits):
        if b:
            world = add_edge(world, *pair.edge)
    target.prepare(graph)
    release = target.fit(world, torch.Generator().manual_seed(trial_seed(spec.seed, 0)))
    iterator = pairs
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(pairs, desc=f"one-run {spec.target}", unit="canary", file=sys.stderr)
    scores = np.array([float(attack.score(release, pair, graph)) for pair in iterator])
    est = estimators.estimate(scores[bits == 0], scores[bits == 1], delta=claim.delta, method="one-run",
                              confidence=spec.confidence)
    one_run = _bounds(scores, bits, claim, spec.confidence, est)
    out = Path(out)
    store = Store(out / "audit.sqlite")
    code = provenance.code_identity(type(target), type(attack), type(canary))
    key = run_key(spec.key(), code["key"])
    store.forget(key)  # one training run: nothing to resume, the guesses are recomputed
    store.begin(key, {**asdict(spec), "code": code})
    store.add_trials(key, [(i, int(b), float(sc)) for i, (b, sc) in enumerate(zip(bits, scores))])
    info = {"canary": canary.name, "count": len(pairs), "chosen_by": pairs[0].chosen_by,
            "inserted": int(bits.sum()), **_neighbourhoods(graph, pairs, hops)}
    run_id = f"{readable_name(spec.target)}-{key}-{spec.trials}-one-run"
    result = make_result(spec, key, target, claim, info, attack_name, attack.levels[0], est, scores, bits,
                         wall=time.time() - t0, store_path=store.path, run_id=run_id, mode="one-run", code=code,
                         one_run=one_run, exact=not_computable(
                             claim.delta, "one-run mode: many canaries played at once, not one pair: not computable"))
    save_result(store, out, result)
    return result


def _neighbourhoods(graph: Any, pairs: list[Any], hops: int | None) -> dict[str, Any]:
    """How far apart the one-run canaries are, for the result (:mod:`canaries.spread`)."""
    edges = [p.edge for p in pairs if p.edge is not None]
    if hops is None or len(edges) != len(pairs):
        return {"neighbourhoods": "not checked (the target declares no receptive field in hops)"}
    near = interacting(graph, edges, hops)
    return {"receptive_hops": hops, "interacting": near,
            "neighbourhoods": (f"{len(edges) - near} of {len(edges)} canaries have no other canary within "
                               f"{hops} hops (the target's receptive field)")}


def _bounds(scores: np.ndarray, bits: np.ndarray, claim: targets.Claim, confidence: float,
                    steinke: estimators.Estimate) -> dict[str, Any]:
    """Both one-run analyses of the same scores, named. The verdict stands on Steinke et al.'s
    (assumption-free); the f-DP analysis (Mahloujifar et al. 2024, Gaussian curve) rejects μ-GDP,
    so it refutes the claim only where the claim is μ-GDP and its μ_lb exceeds the claim's μ. At
    δ = 0 the f-DP analysis is refused (a Gaussian curve's ε there is infinite), and the record says so."""
    steinke_row = {"eps_lb": steinke.eps_lb, "analysis": "Steinke, Nasr & Jagielski 2023 (two-sided guesses; "
                                                         "assumption-free; the verdict's bound)"}
    if claim.delta == 0:
        return {"steinke": steinke_row, "fdp_gaussian": {"eps_lb": None, "mu_lb": None, "claimed_mu": claim.gdp_mu,
                                                         "refutes_mu_gdp_claim": False,
                                                         "refused": estimators.pure_refusal("one-run-fdp")}}
    fdp = estimators.estimate(scores[bits == 0], scores[bits == 1], delta=claim.delta, method="one-run-fdp",
                              confidence=confidence)
    refutes = claim.gdp_mu is not None and fdp.mu_lb is not None and fdp.mu_lb > claim.gdp_mu
    return {"steinke": steinke_row,
            "fdp_gaussian": {"eps_lb": fdp.eps_lb, "mu_lb": fdp.mu_lb, "claimed_mu": claim.gdp_mu,
                             "refutes_mu_gdp_claim": bool(refutes),
                             "steinke_same_guesses": fdp.counts.get("steinke_eps"),
                             "analysis": "f-DP, Mahloujifar et al. 2024: rejects μ-GDP for μ < mu_lb; eps_lb is "
                                         "that Gaussian curve's ε at δ (valid only for a Gaussian trade-off)"}}
