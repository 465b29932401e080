"""The default audit (``--attack auto --canary auto``): a portfolio of candidate audits, a pilot of
each, and a certification on trials the choice never saw.

1. **Candidates** (:func:`candidates`): every (level, attack, canary) the target's views allow,
   read from the registries and the target's declarations alone: an attack's ``levels``,
   ``units`` and ``canary_kind``, a canary's ``unit`` and ``relation``, the target's ``levels`` and
   ``unit``, whether its trace takes a gradient canary, and the attack's ``applies_to`` on one probe
   release. Gradient canaries (``relation == "gradient"``) go with gradient attacks, edge and node
   canaries (insertions and removals) with the rest. ``auto`` as a canary is the game's own choice (on the mechanism and trace levels the
   sensitivity probe's witness, where it is playable). Every view gets a learned distinguisher
   (:mod:`attacks.learned`), the fallback wherever no exact score exists.
2. **Pilots**: each candidate, in a fixed order of priority (the single-attack default of earlier
   versions first, then what the target's declarations point to (``Canary.pointed_by``,
   ``Attack.pointed_by``), then every canary on the cheap views, then the views that train a model),
   plays a small number of trials from
   trial stream 1, independent of the run's own stream 0, until the pilot share of the budget is
   spent. Every (view, attack family) is piloted once before a family's second canary, and a
   candidate that would replay a pilot (one pair and one score) is skipped (:mod:`audit.plan.pilot_plan`).
   Its statistic is computed on held-out pilot trials: the score's direction and a cp threshold are
   chosen on the first half of each world's pilot trials, and the statistic is the cp lower bound at that one threshold on the second half (ties broken by the held-out AUC); where
   every bound is 0, the highest one-sided lower bound on the held-out AUC above ½ wins, else the
   first candidate in priority order (:func:`audit.plan.pilot_plan.by_auc_lower`). A
   failed declared-model check at a view sets aside that view's scores that rest on the declared
   model and moves the scores that exploit the deviation to the front (:func:`_act_on_deviation`).
3. **Certification**: the winner plays the rest of the budget from stream 0, sequentially (looks
   at growing trial counts, the confidence spent across them: :mod:`audit.play.sequential_run`), so the run
   stops early when the verdict is settled, a gross bug at the first looks, no signal once the
   claim could not be refuted within the budget. No pilot trial is ever read by the certificate,
   so the choice costs nothing in confidence.

The pilots get :data:`PILOT_SHARE` of the budget, and the certification what is left, sized at the
winner's cost per trial (:func:`audit.play.trial_sizing.certification_trials`, up to
:data:`~audit.play.trial_sizing.EXTEND` times the fixed-budget cap of its view): a bound that is
budget-limited is extended, and the sequential looks stop it as soon as it is settled. The
fixed-budget default of the winner's view (:func:`~audit.play.trial_sizing.auto_trials`) is the floor. The default
budget is in work units (:class:`Meter`: the target's declared costs), so it plays the same trials on
any machine and the same seed gives the same result; a time budget (``--budget 5m``) spends what the
machine affords, and the record's ``replay`` lists the trials it played. Pilots and certification
share one setup (:mod:`audit.play.shared_setup`): a canary's pair, the declared check and the target's
per-world caches are built once for them all.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from attacks import base as attacks
from audit.plan import pilot_plan
from audit.plan.budget import Budget
from audit.plan.meter import PILOT_MIN, PILOT_SHARE, PILOT_TRIALS, Meter  # noqa: F401 - public here as before
from audit.plan.portfolio_candidates import (CHEAP_LEVELS, PILOTED, Candidate, LEVEL_ORDER, candidates,  # noqa: F401
                                             probe_release as _probe_release)
from audit.plan.portfolio_choice import (BY_EXACT, FAMILY, act_on_deviation as _act_on_deviation, choose as _choose,  # noqa: F401
                                         direction as _direction, estimator as _estimator, heldout_statistic)
from audit.plan.portfolio_validity import (deviation as _deviation, failed_tests as _failed_tests,  # noqa: F401
                                           family_valid as _family_valid, gdp_valid as _gdp_valid,
                                           kept_though_the_model_failed as _kept)
from audit.play import game, trial_sizing
from audit.play.shared_setup import SharedSetup
from audit.play.trial_runner import release_shared
from audit.records.log import get as _logger
from audit.records.result import Result
from audit.records.store import Store
from audit.stats import family_fit, node_family, pair_prior
from targets import base as targets
from targets.base import Level

log = _logger(__name__)

#: the default budget of ``run``: work units, so the same seed gives the same result on any machine
#: (the README's main job takes about two minutes on 2 cores)
DEFAULT_BUDGET = Budget(units=120.0)


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def run(spec: game.AuditSpec, budget: Budget, *, out: str | Path = "results", jobs: int = 1,
        progress: bool = True, fresh: bool = False) -> Result:
    """Pilot every candidate the budget allows, choose on held-out pilot trials, certify the winner
    on stream 0. The result's ``portfolio`` records every candidate, its statistic and the choice.

    All of it on one thread (:func:`targets.one_torch_thread`), as each pilot and the certification
    run: the probe release and the pilots' pairs too (a worst-case canary's search reads the target's
    noiseless map, whose floats would otherwise follow the machine's thread count)."""
    with targets.one_torch_thread():
        return _run(spec, budget, out=out, jobs=jobs, progress=progress, fresh=fresh)


def _run(spec: game.AuditSpec, budget: Budget, *, out: str | Path, jobs: int, progress: bool, fresh: bool) -> Result:
    t0 = time.time()
    shared = SharedSetup(game.setup_run(spec))
    graph, target, claim = shared.setup
    pool, skipped = candidates(target, graph)
    if not pool:
        raise ValueError(f"no (level, attack, canary) in this version fits target {spec.target!r}")
    probes: dict[str, targets.Release | None] = {}

    def probe() -> targets.Release:
        return _probe_release(target, graph, probes)

    meter = Meter(budget, target, t0, probe)
    try:
        rows = _pilots(spec, pool, meter, claim, shared, out=out, jobs=jobs, fresh=fresh, progress=progress)
        piloted = [r for r in rows if r["status"] == PILOTED]
        barred = {(r["level"], r["attack"], r["canary"]) for r in rows
                  if "declared model failed" in r["status"] or r["status"].startswith("failed")}
        winner, why = _choose(piloted, next((c for c in pool if (c.level, c.attack, c.canary) not in barred), pool[0]))
        estimator, estimator_why = _estimator(spec, piloted, winner)
        family = estimator == FAMILY
        if family:  # the sampler checks' releases, sized from what is left and paid before the certification is sized
            family, refused = meter.sampler_releases(target.trial_cost(Level.TRACE))
            estimator, estimator_why = (estimator, estimator_why) if family else ("cp", refused)
        # the family fit picks the score's orientation on its own selection share; an exact loss chosen by its
        # pair's ε (no pilot showed a signal) keeps its own (higher = IN), not a pilot's noise
        by_exact = winner.by_exact_eps is not None
        node_releases = 0  # a whole node's exact loss: its k_t law checked on releases of their own, paid first
        if by_exact and not family and node_family.law_of(_row_of(piloted, winner)["record"]["canary"]) is not None:
            node_releases, refused = meter.node_releases(target.trial_cost(Level.TRACE))
            estimator_why += f"; {refused}" if refused else (
                "; the whole-node family fit at its own a-priori share where the node's k_t check passes, cp at "
                "its share beside it")
        trials, sizing = trial_sizing.certification_trials(meter, winner, piloted, claim, spec)
        # that pair's declared law fixes, before any trial, the one false-positive share cp tests at this size
        prior = _prior_fraction(piloted, winner, claim, trials, spec, shared, probes) if by_exact and not family \
            else None
        attack = winner.attack if family or by_exact or _direction(piloted, winner) > 0 else \
            attacks.REVERSED + winner.attack
        final = replace(spec, attack=attack, canary=winner.canary, level=winner.level, trials=trials, trial_stream=0,
                        estimator="cp" if family else estimator)
        if progress:
            log.info(f"portfolio: certifying {winner.label} on {trials:,} fresh trials ({why})")
        result = game.run_audit(final, out=out, jobs=jobs, progress=progress, fresh=fresh,  # a weak signal: the
                                sequential=not (family or by_exact),  # whole budget, not a stop once settled
                                shared=shared, family=family, fp_fraction=prior,
                                node_check=node_releases if prior is not None else 0)
    finally:
        release_shared()
    unreached = pilot_plan.unreached(pilot_plan.cover_order(pool, _waiting), rows,
                                     lambda: Meter(budget, target, t0, probe),
                                     pilot_size=lambda c: PILOT_TRIALS[c.level], share=PILOT_SHARE,
                                     in_trials=budget.trials is not None)
    record = {"budget": budget.describe(), "pilot_share": PILOT_SHARE, "pilot_stream": 1,
              "candidates": rows, "not_applicable": skipped, "views_not_reached": unreached,
              "winner": {"level": winner.level, "attack": winner.attack, "canary": winner.canary,
                         "certified_as": attack},
              "why": why, "estimator": estimator, "estimator_why": estimator_why, "certification_trials": trials, "certification_sizing": sizing,
              "prior_fp_fraction": prior, "node_check_releases": node_releases,
              "replay": {"pilots": {_label(r): r["trials"] for r in rows if "trials" in r},
                         "certification_trials": trials},
              "setups_built": shared.counts(), "wall_s": time.time() - t0}
    if budget.units is not None:
        record["units_spent_on_pilots"] = round(meter.units, 6)
    result = result.replace(extra={**result.extra, "portfolio": record}, wall_time_s=time.time() - t0)
    game.save_result(Store(Path(out) / "audit.sqlite"), Path(out), result)
    return result


def _label(row: dict[str, Any]) -> str:
    return f"{row['attack']} / {row['canary']} @ {row['level']}"


def _pilots(spec: game.AuditSpec, pool: list[Candidate], meter: Meter, claim: targets.Claim, shared: SharedSetup,
            *, out: str | Path, jobs: int, fresh: bool, progress: bool) -> list[dict[str, Any]]:
    """Play each candidate's pilot in order while the pilot share lasts; one row per candidate. Where
    a pilot's declared-model check fails at its view, the rest of the order acts on it
    (:func:`_act_on_deviation`)."""
    rows: list[dict[str, Any]] = []
    pool, acted, tried = list(pool), set(), set()
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}  # (view, attack, pair) → the row of the pilot that played it
    checks: dict[tuple[Any, ...], Any] = {}      # (view, pair) → its declared-model check's record
    probes: dict[str, targets.Release | None] = {}
    unbuilt: dict[tuple[Any, ...], str] = {}     # (view, canary, error) → the first candidate whose pair failed so
    while pool:
        cand = pool.pop(pilot_plan.next_index(pool, tried, _waiting))
        tried.add(pilot_plan.family(cand))
        row: dict[str, Any] = {"level": cand.level, "attack": cand.attack, "canary": cand.canary,
                               **({"pointed_by": cand.pointed_by} if cand.pointed_by else {})}
        n = meter.pilot_size(cand, len(rows))
        if n < PILOT_MIN:
            rows.append({**row, "status": "not piloted: the pilot share of the budget was spent"})
            continue
        pilot = replace(spec, attack=cand.attack, canary=cand.canary, level=cand.level, trials=n, trial_stream=1,
                        estimator="cp")
        try:  # a pair that cannot be built costs nothing and says why (e.g. a trace that ignores its canary)
            key = _pair_key(pilot, cand, shared, out)
        except Exception as err:  # noqa: BLE001 - recorded, not fatal
            why = f"{type(err).__name__}: {err}"
            first = unbuilt.setdefault((cand.level, cand.canary, why), cand.label)
            rows.append({**row, "status": f"failed: the pair cannot be built: {why}"[:300] if first == cand.label
                         else f"failed: the pair cannot be built (as for {first})"})
            continue
        same = _duplicate(cand, key, shared, seen, checks, probes)
        if same:
            rows.append({**row, "status": f"not piloted: {same}"})
            continue
        start = time.time()
        meter.charge(cand, n)
        try:
            result = game.run_audit(pilot, out=out, jobs=jobs, progress=False, fresh=fresh, shared=shared,
                                    exact=False, save=False)
        except Exception as err:  # noqa: BLE001 - a candidate that cannot play is recorded, not fatal
            rows.append({**row, "status": f"failed: {type(err).__name__}: {err}"[:300],
                         "seconds": time.time() - start})
            continue
        checks.setdefault((cand.level, key), result.declared)
        with Store(result.store) as store:
            out_s, in_s = game.worlds(store.trials(result.key, limit=n))
        stat = heldout_statistic(out_s, in_s, delta=claim.delta, confidence=spec.confidence)
        valid = _gdp_valid(claim, cand.attack, result.declared, result.canary)
        family = _family_valid(claim, cand.level, result.declared, result.canary)
        if family:
            stat["heldout_family_eps_lb"] = family_fit.pilot_bound(
                out_s, in_s, steps=_steps(shared, probes), q=float(result.canary["sampling_rate"]),
                delta=claim.delta, confidence=spec.confidence)
        if attacks.get(cand.attack).exact_loss and cand.level == Level.TRACE:  # the pair's ε, read off its record
            stat["pair_exact_eps"] = pair_prior.exact_from_record(result.canary, _steps(shared, probes), claim.delta)
        rows.append({**row, "status": PILOTED, "trials": n, "seconds": time.time() - start,
                     "canary_chosen": result.canary.get("canary"), **stat, "gdp_valid": valid,
                     "family_valid": family, "record": result.as_pilot()})
        seen[(cand.level, cand.attack, key)] = rows[-1]
        failed = _deviation(result.declared)
        if failed and cand.level not in acted:
            acted.add(cand.level)
            pool = _act_on_deviation(cand.level, failed, pool, rows, keep=lambda name: _kept(
                name, result.declared, result.canary, family), tests=_failed_tests(result.declared))
        if progress:
            log.info(f"pilot {cand.label}: held-out ε_lb {stat['heldout_eps_lb']:.3f}, AUC {stat['heldout_auc']:.3f} "
                     f"({n} trials, {time.time() - start:.0f}s)")
    return rows


def _prior_fraction(piloted: list[dict[str, Any]], winner: Candidate, claim: targets.Claim, trials: int,
                    spec: game.AuditSpec, shared: SharedSetup, probes: dict[str, targets.Release | None]
                    ) -> float | None:
    """The OUT false-positive share at which the winner's exact loss is expected to certify the most on
    `trials` trials, from its pair's record alone (:func:`audit.stats.pair_prior.prior_fraction`)."""
    row = _row_of(piloted, winner)
    found = pair_prior.prior_fraction(row["record"]["canary"], _steps(shared, probes), trials // 2,
                                      trials - trials // 2, claim.delta, spec.confidence)
    return None if found is None else found[0]


def _row_of(piloted: list[dict[str, Any]], winner: Candidate) -> dict[str, Any]:
    """The winner's pilot row."""
    return next(r for r in piloted if (r["level"], r["attack"], r["canary"]) == (winner.level, winner.attack,
                                                                                winner.canary))


def _waiting(cand: Candidate) -> bool:
    """A score that waits for a deviation (``Attack.after_deviation``) and no deviation promoted."""
    return attacks.get(cand.attack).after_deviation and not cand.pointed_by


def _steps(shared: SharedSetup, probes: dict[str, targets.Release | None]) -> int:
    """T: the number of steps the target's trace releases (one probe release)."""
    graph, target, _ = shared.setup
    return len(_probe_release(target, graph, probes).view(Level.TRACE))


def _pair_key(pilot: game.AuditSpec, cand: Candidate, shared: SharedSetup, out: str | Path) -> tuple[Any, ...]:
    """The pilot's resolved pair (:func:`audit.play.game.resolve_pair`, through the shared memo)."""
    return pilot_plan.pair_fingerprint(game.resolve_pair(pilot, cand.attack, cand.level, shared.setup, shared=shared,
                                                         out=out))


def _duplicate(cand: Candidate, key: tuple[Any, ...], shared: SharedSetup, seen: dict[tuple[Any, ...], dict[str, Any]],
               checks: dict[tuple[Any, ...], Any], probes: dict[str, targets.Release | None]) -> str | None:
    """Why the candidate, whose resolved pair is `key` (:func:`_pair_key`), would play what a pilot still in the
    running played (:mod:`audit.plan.pilot_plan`), or None."""
    same = seen.get((cand.level, cand.attack, key))
    if same is not None and same["status"] == PILOTED:
        return f"the same pair and score as {_label(same)} (one pair, the same trials)"
    if (cand.level, key) not in checks:
        return None
    graph, target, _ = shared.setup
    other = attacks.make(cand.attack).same_score_as(_probe_release(target, graph, probes), graph,
                                                    checks[(cand.level, key)])
    same = seen.get((cand.level, other, key)) if other else None
    if same is not None and same["status"] == PILOTED:
        return (f"the same pair and score as {_label(same)} (the {cand.attack} score equals {other}'s on this "
                "release: its declared-model check found no entry it exploits)")
    return None


def render(record: dict[str, Any]) -> str:
    """The portfolio's table: every candidate, its pilot statistic, and why the winner won."""
    lines = [f"portfolio ({record['budget']}; pilots on trial stream {record['pilot_stream']}, certified on "
             f"{record['certification_trials']:,} fresh trials):",
             "| candidate | pilot trials | held-out ε_lb | held-out AUC | direction | s | status |",
             "|---|---|---|---|---|---|---|"]
    w = record["winner"]
    waiting = []
    for r in record["candidates"]:
        label = f"{r['attack']} / {r['canary']} @ {r['level']}"
        if r["status"] == "not piloted: the pilot share of the budget was spent":
            waiting.append(label)
            continue
        mark = " **(chosen)**" if (r["level"], r["attack"], r["canary"]) == (w["level"], w["attack"], w["canary"]) else ""
        if r["status"] == PILOTED:
            lines.append(f"| {label}{mark} | {r['trials']} | {r['heldout_eps_lb']:.3f} | {r['heldout_auc']:.3f} | "
                         f"{r['direction']} | {r['seconds']:.0f} | piloted |")
        else:
            lines.append(f"| {label}{mark} | – | – | – | – | – | {r['status']} |")
    if waiting:
        lines.append(f"| {len(waiting)} more ({', '.join(waiting[:3])}{', …' if len(waiting) > 3 else ''}) | – | – | – "
                     "| – | – | not piloted: the pilot share of the budget was spent (raise --budget) |")
    for s in record.get("not_applicable", []):
        who = f"{s['attack']} / {s['canary']} @ {s['level']}" if "canary" in s else f"{s['attack']} @ {s['level']}"
        lines.append(f"| {who} | – | – | – | – | – | not applicable: {s['why']} |")
    for v in record.get("views_not_reached", []):
        lines.append(f"view not reached: {v['view']} (no pilot played there; its first candidate {v['first']}): a "
                     f"budget of about {v['budget']} would reach it (--budget)")
    lines.append(f"chosen: {w['attack']} / {w['canary']} @ {w['level']}: {record['why']}")
    if str(record.get("estimator_why", "")).startswith("budget-limited"):  # the family fit refused (audit.family_fit)
        lines.append(f"estimator: {record['estimator']} ({record['estimator_why']})")
    return "\n".join(lines)
