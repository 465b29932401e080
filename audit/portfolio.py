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
   versions first, then every canary on the cheap views, then the views that train a model), plays a small number of trials from
   trial stream 1, independent of the run's own stream 0, until the pilot share of the budget is
   spent. Its statistic is computed on held-out pilot trials: the score's direction and a cp
   threshold are chosen on the first half of each world's pilot trials, and the statistic is the
   cp lower bound at that one threshold on the second half (ties broken by the held-out AUC).
3. **Certification**: the winner plays the rest of the budget from stream 0, sequentially (looks
   at growing trial counts, the confidence spent across them: :mod:`audit.sequential_run`), so the run
   stops early when the verdict is settled, a gross bug at the first looks, no signal once the
   claim could not be refuted within the budget. No pilot trial is ever read by the certificate,
   so the choice costs nothing in confidence.

A time budget (``--budget 5m``) gives the pilots :data:`PILOT_SHARE` of it and sizes the
certification from the winner's measured seconds per trial (up to :data:`EXTEND` times the
fixed-budget cap of its view): a bound that is budget-limited is extended, and the sequential
looks stop it as soon as it is settled. The fixed-budget default of the winner's view
(:func:`audit.game.auto_trials`) is the floor: on a slow or loaded machine the run takes longer than
its time budget rather than certify on fewer trials than a named audit would.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks import base as attacks
from attacks.metrics import rates_at
from audit import estimators, game
from audit.budget import Budget
from audit.result import Result
from audit.store import Store
from canaries import base as canaries
from targets import base as targets
from targets.base import Level

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
#: a time budget may extend the certification up to this multiple of the view's fixed-budget cap
EXTEND = 4
#: the default budget of ``run`` (the README's main job takes about this long on 2 cores)
DEFAULT_BUDGET = Budget(seconds=120.0)


@dataclass(frozen=True)
class Candidate:
    level: Level
    attack: str
    canary: str

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
    graph_canaries = ["auto"] + [c for c in names if c not in gradient and canaries.get(c).unit == target.unit]
    gradient_canaries = [c for c in names if c in gradient] if gradient_ok else []
    classic = _classic(target, graph)
    probes: dict[str, targets.Release | None] = {}
    skipped: list[dict[str, Any]] = []
    found: list[tuple[tuple[int, ...], Candidate]] = []
    for a_rank, name in enumerate(attacks.available()):
        cls = attacks.get(name)
        if target.unit not in cls.units:
            continue
        for level in cls.levels:
            if level not in target.levels:
                continue
            pool = _canaries_for(cls.canary_kind, level, graph_canaries, gradient_canaries)
            if not pool:
                continue
            if not _applies(cls, level, target, graph, probes):
                skipped.append({"attack": name, "level": level, "why": "its applies_to refuses this target's release"})
                continue
            for c_rank, canary in enumerate(pool):
                first = next((k for k, (a, c) in enumerate(classic) if a == name and canary in ("auto", c)),
                             len(classic))
                cost = 0 if level in CHEAP_LEVELS else 1
                found.append(((first, cost, c_rank, LEVEL_ORDER.index(level), a_rank), Candidate(level, name, canary)))
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
    if "release" not in probes:
        target.prepare(graph)
        rng = torch.Generator().manual_seed(int(np.random.SeedSequence([0xA991, 1]).generate_state(1)[0]))
        probes["release"] = targets.check_release(target.fit(graph, rng), target)
    return bool(cls().applies_to(probes["release"]))


# ---------------------------------------------------------------------------------------------
# the held-out pilot statistic
# ---------------------------------------------------------------------------------------------
def heldout_statistic(out_s: np.ndarray, in_s: np.ndarray, *, delta: float, confidence: float) -> dict[str, Any]:
    """Direction and cp threshold chosen on the first half of each world's trials (index order);
    the cp lower bound at that threshold, and the AUC, on the second half."""
    h0, h1 = len(out_s) // 2, len(in_s) // 2
    fit_out, fit_in, held_out, held_in = out_s[:h0], in_s[:h1], out_s[h0:], in_s[h1:]
    sign = 1.0 if estimators.auc(fit_out, fit_in) >= 0.5 else -1.0
    threshold = estimators.select_threshold("cp", sign * fit_out, sign * fit_in, delta=delta, confidence=confidence)
    fp, fn = (int(c[0]) for c in rates_at(sign * held_out, sign * held_in, np.array([threshold])))
    lb = float(estimators.cp_bound(fp, fn, len(held_out), len(held_in), delta, 1.0 - confidence))
    return {"heldout_eps_lb": float(lb), "heldout_auc": float(estimators.auc(sign * held_out, sign * held_in)),
            "direction": "higher = IN" if sign > 0 else "lower = IN", "threshold": float(sign * threshold),
            "n_per_world_heldout": int(len(held_out))}


def _rank(row: dict[str, Any]) -> tuple[float, float]:
    return row["heldout_eps_lb"], row["heldout_auc"]


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def run(spec: game.AuditSpec, budget: Budget, *, out: str | Path = "results", jobs: int = 1,
        progress: bool = True, fresh: bool = False) -> Result:
    """Pilot every candidate the budget allows, choose on held-out pilot trials, certify the winner
    on stream 0. The result's ``portfolio`` records every candidate, its statistic and the choice."""
    t0 = time.time()
    graph, target, claim = game.setup_run(spec)
    pool, skipped = candidates(target, graph)
    if not pool:
        raise ValueError(f"no (level, attack, canary) in this version fits target {spec.target!r}")
    rows = _pilots(spec, pool, budget, claim, out=out, jobs=jobs, fresh=fresh, t0=t0, progress=progress)
    piloted = [r for r in rows if r["status"] == "piloted"]
    winner, why = _choose(piloted, pool[0])
    spent_trials = sum(r.get("trials", 0) for r in rows)
    trials, sizing = _certification_trials(budget, winner, piloted, claim, spec, spent_trials, t0)
    attack = winner.attack if _direction(piloted, winner) > 0 else attacks.REVERSED + winner.attack
    final = replace(spec, attack=attack, canary=winner.canary, level=winner.level, trials=trials, trial_stream=0)
    if progress:
        print(f"portfolio: certifying {winner.label} on {trials:,} fresh trials ({why})", file=sys.stderr)
    result = game.run_audit(final, out=out, jobs=jobs, progress=progress, fresh=fresh, sequential=True)
    record = {"budget": budget.describe(), "pilot_share": PILOT_SHARE, "pilot_stream": 1,
              "candidates": rows, "not_applicable": skipped,
              "winner": {"level": winner.level, "attack": winner.attack, "canary": winner.canary,
                         "certified_as": attack},
              "why": why, "certification_trials": trials, "certification_sizing": sizing,
              "wall_s": time.time() - t0}
    result = result.replace(extra={**result.extra, "portfolio": record}, wall_time_s=time.time() - t0)
    game.save_result(Store(Path(out) / "audit.sqlite"), Path(out), result)
    return result


def _pilots(spec: game.AuditSpec, pool: list[Candidate], budget: Budget, claim: targets.Claim, *,
            out: str | Path, jobs: int, fresh: bool, t0: float, progress: bool) -> list[dict[str, Any]]:
    """Play each candidate's pilot in order while the pilot share lasts; one row per candidate."""
    rows: list[dict[str, Any]] = []
    share_trials = int(PILOT_SHARE * budget.trials) if budget.trials is not None else None
    share_seconds = PILOT_SHARE * budget.seconds if budget.seconds is not None else None
    spent = 0
    for cand in pool:
        row: dict[str, Any] = {"level": cand.level, "attack": cand.attack, "canary": cand.canary}
        n = PILOT_TRIALS[cand.level]
        if share_trials is not None:
            n = min(n, share_trials - spent) // 2 * 2
        over_time = share_seconds is not None and time.time() - t0 >= share_seconds
        if n < PILOT_MIN or (over_time and rows):
            rows.append({**row, "status": "not piloted: the pilot share of the budget was spent"})
            continue
        pilot = replace(spec, attack=cand.attack, canary=cand.canary, level=cand.level, trials=n, trial_stream=1,
                        estimator="cp")
        start = time.time()
        try:
            result = game.run_audit(pilot, out=out, jobs=jobs, progress=False, fresh=fresh)
        except Exception as err:  # noqa: BLE001 - a candidate that cannot play is recorded, not fatal
            rows.append({**row, "status": f"failed: {type(err).__name__}: {err}"[:300],
                         "seconds": time.time() - start})
            continue
        spent += n
        with Store(result.store) as store:
            out_s, in_s = game.worlds(store.trials(result.key, limit=n))
        stat = heldout_statistic(out_s, in_s, delta=claim.delta, confidence=spec.confidence)
        rows.append({**row, "status": "piloted", "trials": n, "seconds": time.time() - start,
                     "canary_chosen": result.canary.get("canary"), **stat})
        if progress:
            print(f"pilot {cand.label}: held-out ε_lb {stat['heldout_eps_lb']:.3f}, AUC {stat['heldout_auc']:.3f} "
                  f"({n} trials, {time.time() - start:.0f}s)", file=sys.stderr)
    return rows


def _choose(piloted: list[dict[str, Any]], first: Candidate) -> tuple[Candidate, str]:
    if not piloted:
        return first, "no pilot could be played: the first candidate in priority order"
    best = max(piloted, key=_rank)  # max keeps the earliest (highest priority) of equals
    cand = Candidate(best["level"], best["attack"], best["canary"])
    others = sorted((_rank(r) for r in piloted if r is not best), reverse=True)
    runner = f"; runner-up {others[0][0]:.3f} / AUC {others[0][1]:.3f}" if others else ""
    if best["heldout_eps_lb"] <= 0:
        return cand, (f"no pilot of {len(piloted)} certified anything on its held-out half: the highest held-out "
                      f"AUC, {best['heldout_auc']:.3f}{runner}")
    return cand, (f"highest held-out statistic of {len(piloted)} pilots: cp ε_lb {best['heldout_eps_lb']:.3f} at "
                  f"the threshold chosen on the pilot's other half, AUC {best['heldout_auc']:.3f}{runner}")


def _direction(piloted: list[dict[str, Any]], winner: Candidate) -> float:
    for r in piloted:
        if (r["level"], r["attack"], r["canary"]) == (winner.level, winner.attack, winner.canary):
            return 1.0 if r["direction"] == "higher = IN" else -1.0
    return 1.0


def _certification_trials(budget: Budget, winner: Candidate, piloted: list[dict[str, Any]], claim: targets.Claim,
                          spec: game.AuditSpec, spent: int, t0: float) -> tuple[int, str]:
    """The certification's trial budget (even, ≥ 8) and how it was sized."""
    if budget.trials is not None:
        n = max(8, (budget.trials - spent) // 2 * 2)
        return n, f"the trial budget less the {spent:,} pilot trials"
    fixed, _ = game.auto_trials(claim, winner.level, spec.confidence)
    cap = EXTEND * game.BUDGET_CAP["mechanism" if winner.level == Level.MECHANISM else "training"]
    rate = [r["seconds"] / r["trials"] for r in piloted
            if (r["level"], r["attack"], r["canary"]) == (winner.level, winner.attack, winner.canary)]
    left = (budget.seconds or 0.0) - (time.time() - t0)
    if not rate:
        return fixed, "the fixed-budget default (no pilot measured a trial's cost)"
    n = int(left / max(rate[0], 1e-6)) // 2 * 2
    if n <= fixed:
        return fixed, (f"the fixed-budget default, the floor of a time budget ({max(left, 0):.0f}s left at the "
                       f"pilot's {rate[0] * 1e3:.1f} ms per trial would give {max(n, 0):,})")
    n = min(n, cap)
    return n, (f"{left:.0f}s left at the pilot's {rate[0] * 1e3:.1f} ms per trial (capped at {cap:,}; the fixed "
               f"default {fixed:,} is the floor)")


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
        if r["status"].startswith("not piloted"):
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
        lines.append(f"| {s['attack']} @ {s['level']} | – | – | – | – | – | not applicable: {s['why']} |")
    lines.append(f"chosen: {w['attack']} / {w['canary']} @ {w['level']}: {record['why']}")
    return "\n".join(lines)
