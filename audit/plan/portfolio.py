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

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks import base as attacks
from attacks.metrics import auc_lower, rates_at
from audit.stats import estimators, family_fit
from audit.play import game, trial_sizing
from audit.plan import pilot_plan
from audit.plan.budget import Budget
from audit.records.log import get as _logger
from audit.records.result import Result
from audit.play.shared_setup import SharedSetup
from audit.records.store import Store
from audit.play.trial_runner import release_shared
from canaries import base as canaries
from targets import base as targets
from targets.base import Level
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw
from audit.stats.kinds import Method

log = _logger(__name__)

#: share of the budget the pilots may spend
PILOT_SHARE = 0.3
#: trials one pilot plays, by level (views that train a model cost more per trial)
PILOT_TRIALS = {Level.MECHANISM: 200, Level.TRACE: 200, Level.WEIGHTS: 60, Level.API: 60}
#: the fewest trials a pilot is worth playing (half of them choose, half are held out)
PILOT_MIN = 40
#: strongest first: the order candidates of one canary are piloted in
LEVEL_ORDER = (Level.MECHANISM, Level.TRACE, Level.WEIGHTS, Level.API)
#: views whose trials are cheap: every canary is piloted on them before any view that trains a model
CHEAP_LEVELS = (Level.MECHANISM, Level.TRACE)
#: the portfolio's name for the subsampled-Gaussian family fit (:mod:`audit.stats.family_fit`)
FAMILY = "subsampled-gaussian"
#: the default budget of ``run``: work units, so the same seed gives the same result on any machine
#: (the README's main job takes about two minutes on 2 cores)
DEFAULT_BUDGET = Budget(units=120.0)


@dataclass(frozen=True)
class Candidate:
    level: Level
    attack: str
    canary: str
    #: why the target's declarations put it early (:func:`candidates`); empty where nothing did
    pointed_by: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        return f"{self.attack} / {self.canary} @ {self.level}"


# ---------------------------------------------------------------------------------------------
# candidates
# ---------------------------------------------------------------------------------------------
def candidates(target: targets.Target, graph: Any) -> tuple[list[Candidate], list[dict[str, Any]]]:
    """The candidates the target's views allow, in the order they are piloted, and the attacks left
    out with the reason (an attack whose ``applies_to`` refuses the target's probe release)."""
    gradient_ok = target.takes_gradient_canary(graph)
    names = [c for c in canaries.available() if not c.startswith("witness")]
    gradient = {c for c in names if canaries.get(c).relation == "gradient"}
    playable = set(canaries.relation_canaries(target, graph))  # a needs_map canary only where a map is declared
    graph_canaries = ["auto"] + [c for c in names if c in playable]
    gradient_canaries = [c for c in names if c in gradient] if gradient_ok else []
    classic = _classic(target, graph)
    probes: dict[str, targets.Release | None] = {}
    skipped: list[dict[str, Any]] = [
        {"attack": "every attack", "level": "every view", "canary": c,
         "why": "the canary reads the target's noiseless map (needs_map), which this target does not declare"}
        for c in names if c not in gradient and c not in playable and canaries.get(c).unit == target.unit]
    found: list[tuple[tuple[int, ...], Candidate]] = []
    pointed = {c: why for c in graph_canaries[1:] + gradient_canaries
               if (why := canaries.get(c).pointed_by(target, graph))}
    for a_rank, name in enumerate(attacks.available()):
        cls = attacks.get(name)
        if target.unit not in cls.units:
            continue
        for level in cls.levels:
            if level not in target.levels:
                continue
            if level == Level.TRACE and not gradient_canaries and not _probe_release(target, graph, probes).trace:
                skipped.append({"attack": name, "level": level, "why": "the release offers no trace on a graph "
                                "canary, and the target takes no gradient canary"})
                continue
            pool = _canaries_for(cls.canary_kind, level, graph_canaries, gradient_canaries)
            if not pool:
                continue
            if not _applies(cls, level, target, graph, probes):
                skipped.append({"attack": name, "level": level, "why": "its applies_to refuses this target's release"})
                continue
            attack_why = _pointed_attack(cls, target, graph, probes)
            for c_rank, canary in enumerate(pool):
                first = next((k for k, (a, c) in enumerate(classic) if a == name and canary in ("auto", c)),
                             len(classic))
                why = "; ".join(w for w in (attack_why, pointed.get(canary)) if w)
                tier = 0 if first == 0 else 1 if why else 3 if cls.after_deviation else 2
                cost = 0 if level in CHEAP_LEVELS else 1
                found.append(((tier, first, cost, c_rank, LEVEL_ORDER.index(level), a_rank),
                              Candidate(level, name, canary, why)))
    found.sort(key=lambda item: item[0])
    return [c for _, c in found], skipped


def _classic(target: targets.Target, graph: Any) -> list[tuple[str, str]]:
    """The single-attack default of earlier versions (``attacks.auto_attacks`` with its canary),
    piloted first."""
    try:
        return [(a, canaries.auto_canary(target, graph, a)) for a in attacks.auto_attacks(target, graph)]
    except ValueError:
        return []


def _canaries_for(kind: str, level: Level, graph_canaries: list[str], gradient_canaries: list[str]) -> list[str]:
    if kind == "gradient":
        return gradient_canaries
    if kind == "any" and level == Level.TRACE and gradient_canaries:
        return gradient_canaries
    return graph_canaries


def _applies(cls: type[attacks.Attack], level: Level, target: targets.Target, graph: Any,
             probes: dict[str, targets.Release | None]) -> bool:
    """The attack's ``applies_to`` on one probe release of the base graph (drawn once, only for an
    attack that overrides the default, from a generator no trial uses)."""
    if cls.applies_to is attacks.Attack.applies_to:
        return True
    return cls().asks_applies(_probe_release(target, graph, probes), graph)


def _pointed_attack(cls: type[attacks.Attack], target: targets.Target, graph: Any,
                    probes: dict[str, targets.Release | None]) -> str | None:
    """Why the target's release points to the attack (:meth:`attacks.base.Attack.pointed_by`)."""
    if cls.pointed_by is attacks.Attack.pointed_by:
        return None
    return cls().pointed_by(_probe_release(target, graph, probes))


def _probe_release(target: targets.Target, graph: Any, probes: dict[str, targets.Release | None]) -> targets.Release:
    """One release of the base graph, drawn once, from a generator no trial uses."""
    if probes.get("release") is None:
        target.prepare(graph)
        rng = torch.Generator().manual_seed(int(np.random.SeedSequence([0xA991, 1]).generate_state(1)[0]))
        probes["release"] = targets.check_release(target.fit(graph, rng), target)
    return probes["release"]


# ---------------------------------------------------------------------------------------------
# the held-out pilot statistic
# ---------------------------------------------------------------------------------------------
def heldout_statistic(out_s: np.ndarray, in_s: np.ndarray, *, delta: float, confidence: float) -> dict[str, Any]:
    """Direction and cp threshold chosen on the first half of each world's trials (index order);
    the cp lower bound at that threshold, and the AUC, on the second half. Beside it the same for
    ``gdp`` (its own threshold rule on the first half, its bound on the second), which the portfolio
    reads only where gdp is valid for the candidate (:func:`_gdp_valid`)."""
    h0, h1 = len(out_s) // 2, len(in_s) // 2
    fit_out, fit_in, held_out, held_in = out_s[:h0], in_s[:h1], out_s[h0:], in_s[h1:]
    sign = 1.0 if estimators.auc(fit_out, fit_in) >= 0.5 else -1.0
    threshold = estimators.select_threshold("cp", sign * fit_out, sign * fit_in, delta=delta, confidence=confidence)
    fp, fn = (int(c[0]) for c in rates_at(sign * held_out, sign * held_in, np.array([threshold])))
    lb = float(estimators.cp_bound(fp, fn, len(held_out), len(held_in), delta, 1.0 - confidence))
    g_threshold = estimators.select_threshold("gdp", sign * fit_out, sign * fit_in, delta=delta, confidence=confidence)
    gfp, gfn = (int(c[0]) for c in rates_at(sign * held_out, sign * held_in, np.array([g_threshold])))
    mu = float(estimators.gdp_mu_bound(gfp, gfn, len(held_out), len(held_in), 1.0 - confidence))
    gdp_lb = 0.0 if delta == 0 else float(estimators.gdp_epsilon(mu, delta))  # gdp refused at δ = 0
    return {"heldout_eps_lb": float(lb), "heldout_gdp_eps_lb": gdp_lb, "heldout_auc": float(estimators.auc(sign * held_out, sign * held_in)),
            "heldout_auc_lower": auc_lower(sign * held_out, sign * held_in, confidence),
            "direction": "higher = IN" if sign > 0 else "lower = IN", "threshold": float(sign * threshold),
            "n_per_world_heldout": int(len(held_out))}


def _rank(row: dict[str, Any]) -> tuple[float, float]:
    """A pilot's held-out statistic: its cp bound, or its gdp or family-fit bound where that estimator
    is valid and larger."""
    gdp = row.get("heldout_gdp_eps_lb", 0.0) if row.get("gdp_valid") else 0.0
    family = row.get("heldout_family_eps_lb", 0.0) if row.get("family_valid") else 0.0
    return max(row["heldout_eps_lb"], gdp, family), row["heldout_auc"]


def _family_valid(claim: targets.Claim, level: str, declared: dict[str, Any] | None,
                  canary: dict[str, Any] | None) -> str | None:
    """Why the subsampled-Gaussian family fit (:mod:`audit.stats.family_fit`) may certify this candidate, or
    None: a trace view whose gradient canary is a fixed vector entering each step on its own Poisson(q)
    coin, q < 1 (not a whole node, whose k_t is drawn with the batch), under the declared Gaussian
    noise, which passed its check or was found off only in its std (the family leaves the scale
    unknown). Any score is then a test of T subsampled Gaussian steps. Whether the sampler is the
    declared Poisson one is measured before the certificate (the sampler checks), not trusted."""
    law = PairLaw.of(canary or {})
    if claim.delta == 0 or level != Level.TRACE or law.node is not None or law.noise != NoiseLaw.GAUSSIAN:
        return None
    if not (law.sampling_rate is not None and 0.0 < law.sampling_rate < 1.0):
        return None
    if not ((_model_passed(declared) and _all_gaussian(declared)) or _only_scale_off(declared)):
        return None
    return "T Poisson(q)-subsampled Gaussian steps of a fixed gradient canary under the declared Gaussian noise"


def _gdp_valid(claim: targets.Claim, attack: str, declared: dict[str, Any] | None,
               canary: dict[str, Any] | None = None) -> str | None:
    """Why ``gdp`` is a valid estimator for this candidate, or None: the claim is μ-GDP (it then
    bounds every test's error pair by its Gaussian curve, whatever the score), or the score is the
    declared model's exact likelihood ratio, the model passed its check at the view and every step it
    checked is Gaussian, with no sampling mixture (:func:`_mixture`): the trade-off is then the declared
    Gaussian one. An exact ratio of another law (HeterPoisson's SML, a Laplace) or of a mixture has that
    law's trade-off, not a Gaussian curve: a Gaussian curve through one of its points can claim more ε
    than the law has, so gdp is refused there, and at δ = 0 always. Or the
    score is linear in the release given the pair's record `canary` (``Attack.linear_in_release``) and
    the check found only the noise std off (:func:`_only_scale_off`): each world's score is then
    exactly Gaussian with one variance, whatever the std, so its trade-off is a Gaussian curve.
    """
    if claim.delta == 0:
        return None  # a Gaussian curve's ε at δ = 0 is infinite: gdp is refused for a pure ε-DP claim
    if claim.gdp_mu is not None:
        return "the claim is μ-GDP"
    if attacks.get(attack).rests_on_declared_model() and _model_passed(declared) and _all_gaussian(declared) \
            and not _mixture(canary or {}):
        return "an exact likelihood ratio of a declared Gaussian model that passed its check"
    if attacks.make(attack).linear_in_release(canary or {}) and _only_scale_off(declared):
        return ("a score linear in the release, on noise the check found Gaussian, of one std in both worlds and "
                "around the declared mean, with only its std off the declared one: both worlds' scores are "
                "Gaussian with one variance, so the trade-off is a Gaussian curve")
    return None


#: the tests that must have run and passed on a step whose only failure is its scale: the law's
#: shape (standardised by the measured variance, so free of the scale), one std in both worlds,
#: the declared mean (:mod:`audit.declared_model.declared`)
_SHAPE_TESTS = frozenset({"shape-ks", "kurtosis", "world-scale", "entry-mean", "global-mean"})


def _only_scale_off(declared: dict[str, Any] | None) -> bool:
    """The check failed, and only on the noise std (``scale``): every failing step declares the
    Gaussian law and passed its shape, world-scale and mean tests, no joint deviation was found,
    and every other step passed or declares no law. This reading spends no α of its own: it reads
    the check's tests (α overall, Bonferroni); what it adds rests on those tests' power to reject a
    non-Gaussian shape or a world-dependent std, not on a further test."""
    if not declared or not declared.get("checked") or declared.get("deviations"):
        return False
    steps = declared.get("steps") or []
    failing = [s for s in steps if s.get("status") == "fail"]
    if not failing or any(s.get("status") not in ("pass", "fail", "undeclared") for s in steps):
        return False
    for s in failing:
        tests = s.get("tests") or []
        if s.get("law") != NoiseLaw.GAUSSIAN or any(not t["passed"] and t["name"] != "scale" for t in tests):
            return False
        if not _SHAPE_TESTS <= {t["name"] for t in tests if t["passed"]}:
            return False
    return all(s.get("law") == NoiseLaw.GAUSSIAN for s in steps if s.get("status") == "pass")


def _mixture(canary: dict[str, Any]) -> bool:
    """A trace pair whose canary is drawn with the batch (:func:`attacks.gradient.drawn_with_batch`): the
    exact ratio is then of a mixture of Gaussians, whose trade-off is the subsampled Gaussian's, not a
    Gaussian curve (a Gaussian curve through one of its points can claim more ε than the mixture has)."""
    law = PairLaw.of(canary)
    return law.sampling_rate is not None and law.drawn_with_batch


def _all_gaussian(declared: dict[str, Any]) -> bool:
    """Every step the check passed declares the Gaussian law (a record without the law: not known)."""
    passed = [s for s in declared.get("steps") or [] if s.get("status") == "pass"]
    return bool(passed) and all(s.get("law") == NoiseLaw.GAUSSIAN for s in passed)


def _model_passed(declared: dict[str, Any] | None) -> bool:
    """The declared model passed its check, undeclared steps aside (``DeclaredCheck.allows(strict=False)``,
    what ``--estimator gdp`` needs for its a-priori threshold)."""
    if not declared or not declared.get("checked") or not declared.get("ok") or declared.get("deviations"):
        return False
    return all(s.get("status") in ("pass", "undeclared") for s in declared.get("steps") or [])


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def run(spec: game.AuditSpec, budget: Budget, *, out: str | Path = "results", jobs: int = 1,
        progress: bool = True, fresh: bool = False) -> Result:
    """Pilot every candidate the budget allows, choose on held-out pilot trials, certify the winner
    on stream 0. The result's ``portfolio`` records every candidate, its statistic and the choice."""
    t0 = time.time()
    with targets.one_torch_thread():
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
        piloted = [r for r in rows if r["status"] == "piloted"]
        barred = {(r["level"], r["attack"], r["canary"]) for r in rows if "declared model failed" in r["status"]}
        winner, why = _choose(piloted, next((c for c in pool if (c.level, c.attack, c.canary) not in barred), pool[0]))
        estimator, estimator_why = _estimator(spec, piloted, winner)
        family = estimator == FAMILY
        if family:  # the sampler checks' releases, sized from what is left and paid before the certification is sized
            family, refused = family_fit.budgeted_releases(meter, target.trial_cost(Level.TRACE))
            estimator, estimator_why = (estimator, estimator_why) if family else ("cp", refused)
        trials, sizing = trial_sizing.certification_trials(meter, winner, piloted, claim, spec)
        # the family fit picks the score's orientation on its own selection share
        attack = winner.attack if family or _direction(piloted, winner) > 0 else attacks.REVERSED + winner.attack
        final = replace(spec, attack=attack, canary=winner.canary, level=winner.level, trials=trials, trial_stream=0,
                        estimator="cp" if family else estimator)
        if progress:
            log.info(f"portfolio: certifying {winner.label} on {trials:,} fresh trials ({why})")
        result = game.run_audit(final, out=out, jobs=jobs, progress=progress, fresh=fresh, sequential=not family,
                                shared=shared, family=family)
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


class Meter:
    """What the pilots have spent of the budget, in its own currency: trials, work units (each
    candidate's declared cost: :meth:`targets.base.Target.trial_cost` per trial, and
    :meth:`~targets.base.Target.setup_cost` for the first pilot on each (view, canary), whose pair,
    check and caches the later ones share) or seconds. Trials and units spend the same on any
    machine; seconds do not."""

    def __init__(self, budget: Budget, target: targets.Target, t0: float,
                 probe: Callable[[], targets.Release | None] = lambda: None) -> None:
        self.budget, self.target, self.t0, self.probe = budget, target, t0, probe
        self.trials, self.units = 0, 0.0
        self.setups: set[tuple[str, ...]] = set()

    def setup_units(self, cand: Candidate) -> float:
        """Units the candidate's first trial costs beyond the others: the target's setup on a new
        (view, canary), and the attack's :meth:`~attacks.base.Attack.pair_units` on a new pair (a
        learned distinguisher's training releases)."""
        target = 0.0 if (cand.level, cand.canary) in self.setups else self.target.setup_cost()
        attack = 0.0 if (cand.level, cand.canary, cand.attack) in self.setups else \
            attacks.get(cand.attack).pair_units_on(self.target, cand.level, self.probe())
        return target + attack

    def pilot_size(self, cand: Candidate, rows_so_far: int) -> int:
        """How many of the level's pilot trials fit in what is left of the pilot share (even; below
        :data:`PILOT_MIN` the pilot is not played)."""
        n = PILOT_TRIALS[cand.level]
        b = self.budget
        if b.trials is not None:
            n = min(n, int(PILOT_SHARE * b.trials) - self.trials)
        elif b.units is not None:
            left = PILOT_SHARE * b.units - self.units - self.setup_units(cand)
            n = min(n, int(left / self.trial_cost(cand)))
        elif rows_so_far and time.time() - self.t0 >= PILOT_SHARE * (b.seconds or 0.0):
            return 0
        return n // 2 * 2

    def trial_cost(self, cand: Candidate) -> float:
        """Units one trial of the candidate costs: the target's fit of the view and the attack's score."""
        return self.target.trial_cost(cand.level) + attacks.get(cand.attack).score_cost

    def charge(self, cand: Candidate, n: int) -> None:
        self.units += self.setup_units(cand) + n * self.trial_cost(cand)
        self.setups.update({(cand.level, cand.canary), (cand.level, cand.canary, cand.attack)})
        self.trials += n


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
        same = _duplicate(pilot, cand, shared, out, seen, checks, probes)
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
        key = _pair_key(pilot, cand, shared, out)
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
        rows.append({**row, "status": "piloted", "trials": n, "seconds": time.time() - start,
                     "canary_chosen": result.canary.get("canary"), **stat, "gdp_valid": valid,
                     "family_valid": family, "record": result.as_pilot()})
        seen[(cand.level, cand.attack, key)] = rows[-1]
        failed = _deviation(result.declared)
        if failed and cand.level not in acted:
            acted.add(cand.level)
            scale_only = _only_scale_off(result.declared)
            pool = _act_on_deviation(cand.level, failed, pool, rows, keep=lambda name: scale_only and attacks.make(
                name).linear_in_release(result.canary), tests=_failed_tests(result.declared))
        if progress:
            log.info(f"pilot {cand.label}: held-out ε_lb {stat['heldout_eps_lb']:.3f}, AUC {stat['heldout_auc']:.3f} "
                     f"({n} trials, {time.time() - start:.0f}s)")
    return rows


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


def _duplicate(pilot: game.AuditSpec, cand: Candidate, shared: SharedSetup, out: str | Path,
               seen: dict[tuple[Any, ...], dict[str, Any]], checks: dict[tuple[Any, ...], Any],
               probes: dict[str, targets.Release | None]) -> str | None:
    """Why the candidate would play what a pilot still in the running played (:mod:`audit.plan.pilot_plan`),
    or None."""
    try:
        key = _pair_key(pilot, cand, shared, out)
    except Exception:  # noqa: BLE001 - a pair that cannot be built: the pilot records the failure
        return None
    same = seen.get((cand.level, cand.attack, key))
    if same is not None and same["status"] == "piloted":
        return f"the same pair and score as {_label(same)} (one pair, the same trials)"
    if (cand.level, key) not in checks:
        return None
    graph, target, _ = shared.setup
    other = attacks.make(cand.attack).same_score_as(_probe_release(target, graph, probes), graph,
                                                    checks[(cand.level, key)])
    same = seen.get((cand.level, other, key)) if other else None
    if same is not None and same["status"] == "piloted":
        return (f"the same pair and score as {_label(same)} (the {cand.attack} score equals {other}'s on this "
                "release: its declared-model check found no entry it exploits)")
    return None


def _deviation(declared: dict[str, Any] | None) -> str | None:
    """What the declared-model check found, where it failed (None where it passed or did not run)."""
    if not declared or not declared.get("checked") or (declared.get("ok") and not declared.get("deviations")):
        return None
    found = declared.get("deviations") or []
    return "; ".join(found) if found else str(declared.get("reason") or "the declared noise model failed its check")


def _failed_tests(declared: dict[str, Any] | None) -> set[str]:
    """The names of the tests the declared-model check failed: each step's failing tests (``scale``,
    ``noise-free``, ...) and each joint deviation's (``shared-steps: ...``)."""
    if not declared:
        return set()
    names = {str(t["name"]) for s in declared.get("steps") or [] for t in s.get("tests") or [] if not t.get("passed")}
    return names | {str(d).split(":")[0].strip() for d in declared.get("deviations") or []}


def _act_on_deviation(level: str, failed: str, pool: list[Candidate], rows: list[dict[str, Any]],
                      keep: Callable[[str], bool] = lambda name: False,
                      tests: set[str] | None = None) -> list[Candidate]:
    """The declared model failed its check at `level`: no score there may rest on it any longer.
    Its pilots already played are set aside, those still to play are dropped, and the scores that
    exploit the deviation (``Attack.exploits``: the named test, or any deviation for the learned
    distinguisher) move to the front of the order. Returns the new order of what is left. `keep`:
    the scores kept though they read the model, where the check found only the std off and the
    score is linear in the release (a statistic whose law is then still a Gaussian of one
    variance in both worlds, :func:`_gdp_valid`; its threshold is held out). `tests`: the failed tests'
    names (:func:`_failed_tests`); else read off `failed`, each ``name: detail`` line."""
    why = f"the declared model failed its check at the {level} view ({failed})"
    tests = tests or {line.split(":")[0].strip() for line in failed.split(";")}

    def rests(c: Candidate | dict[str, Any]) -> bool:
        name, lvl = (c.attack, c.level) if isinstance(c, Candidate) else (c["attack"], c["level"])
        return lvl == level and attacks.get(name).rests_on_declared_model() and not keep(name)

    for r in rows:
        if r["status"] == "piloted" and rests(r):
            r["status"] = f"set aside: {why}; the score rests on it"
    for c in pool:
        if rests(c):
            rows.append({"level": c.level, "attack": c.attack, "canary": c.canary,
                         "status": f"not piloted: {why}; the score rests on it"})

    def exploits(c: Candidate) -> bool:
        wanted = set(attacks.get(c.attack).exploits)
        return c.level == level and ("any" in wanted or bool(wanted & tests))

    kept = [c for c in pool if not rests(c)]
    # the scores made for the named test first, then those for any deviation (by exploit_rank)
    first = sorted((replace(c, pointed_by=f"exploits what the check found ({failed})") for c in kept if exploits(c)),
                   key=lambda c: (not set(attacks.get(c.attack).exploits) & tests, attacks.get(c.attack).exploit_rank))
    return first + [c for c in kept if not exploits(c)]


def _choose(piloted: list[dict[str, Any]], first: Candidate) -> tuple[Candidate, str]:
    if not piloted:
        return first, "no pilot could be played: the first candidate in priority order"
    best = max(piloted, key=_rank)  # max keeps the earliest (highest priority) of equals
    cand = Candidate(best["level"], best["attack"], best["canary"])
    others = sorted((_rank(r) for r in piloted if r is not best), reverse=True)
    runner = f"; runner-up {others[0][0]:.3f} / AUC {others[0][1]:.3f}" if others else ""
    top = _rank(best)[0]
    if top <= 0:
        best = pilot_plan.by_auc_lower(piloted)
        if best is None:
            return first, (f"no pilot of {len(piloted)} showed a signal on its held-out half (every held-out ε_lb 0, "
                           "every one-sided lower bound on the held-out AUC ≤ 0.5): the first candidate in priority "
                           "order")
        return Candidate(best["level"], best["attack"], best["canary"]), (
            f"no pilot of {len(piloted)} certified anything on its held-out half: the highest one-sided lower bound "
            f"on the held-out AUC, {best['heldout_auc_lower']:.3f} (AUC {best['heldout_auc']:.3f})")
    how = "cp" if top <= best["heldout_eps_lb"] else \
        FAMILY if best.get("family_valid") and top == best.get("heldout_family_eps_lb") else "gdp"
    return cand, (f"highest held-out statistic of {len(piloted)} pilots: {how} ε_lb {top:.3f} at the threshold "
                  f"chosen on the pilot's other half, AUC {best['heldout_auc']:.3f}{runner}")


def _estimator(spec: game.AuditSpec, piloted: list[dict[str, Any]], winner: Candidate) -> tuple[str, str]:
    """The certification's estimator, chosen on the winner's held-out pilot trials: ``gdp`` where it
    is valid (:func:`_gdp_valid`) and its held-out bound is not below cp's; else the run's own
    (``auto``). A tie at 0 (neither certifies on the pilot's held-out half, a weak signal) goes to gdp:
    where valid it reads the whole Gaussian curve, cp one point of it, and a weak signal certifies
    something only that way (GAP's directed-edge finding at ε = 1: gdp 1.07, cp 0.24)."""
    row = next((r for r in piloted if (r["level"], r["attack"], r["canary"]) ==
                (winner.level, winner.attack, winner.canary)), None)
    if spec.estimator == Method.AUTO and row is not None and row.get("family_valid"):
        family, best = row.get("heldout_family_eps_lb", 0.0), max(row["heldout_eps_lb"], row["heldout_gdp_eps_lb"]
                                                                  if row.get("gdp_valid") else 0.0)
        if family >= best:  # ties (0 at a pilot's size) go to the fit, which has the more power on such traces
            return FAMILY, (f"the subsampled-Gaussian family fit ({row['family_valid']}): its pilot bound {family:.3f} "
                            f"is at least {best:.3f}; certified only where the sampler checks pass, cp beside it")
    if spec.estimator != Method.AUTO or row is None or not row.get("gdp_valid"):
        return spec.estimator, "the run's estimator (gdp is not valid for the winner, or it was named)"
    if row["heldout_gdp_eps_lb"] < row["heldout_eps_lb"]:
        return spec.estimator, (f"the run's estimator: gdp's held-out bound {row['heldout_gdp_eps_lb']:.3f} is below "
                                f"cp's {row['heldout_eps_lb']:.3f}")
    how = "beats" if row["heldout_gdp_eps_lb"] > row["heldout_eps_lb"] else "ties"
    return "gdp", (f"gdp ({row['gdp_valid']}): its held-out bound {row['heldout_gdp_eps_lb']:.3f} {how} cp's "
                   f"{row['heldout_eps_lb']:.3f} on the winner's pilot")


def _direction(piloted: list[dict[str, Any]], winner: Candidate) -> float:
    for r in piloted:
        if (r["level"], r["attack"], r["canary"]) == (winner.level, winner.attack, winner.canary):
            return 1.0 if r["direction"] == "higher = IN" else -1.0
    return 1.0


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
        if r["status"] == "piloted":
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
