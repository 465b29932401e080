"""The portfolio's choice (:mod:`audit.plan.portfolio`, step 2): each pilot's statistic on its held-out
half, the order acted on where a declared-model check fails, the winner, its estimator and its score's
direction.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from attacks import base as attacks
from attacks.metrics import auc_lower, rates_at
from audit.plan import pilot_plan
from audit.plan.portfolio_candidates import PILOTED, Candidate
from audit.play import game
from audit.stats import estimators
from audit.stats.kinds import Method


#: the portfolio's name for the subsampled-Gaussian family fit (:mod:`audit.stats.family_fit`)
FAMILY = "subsampled-gaussian"
#: how :func:`choose` says it chose by the pairs' exact ε (no pilot showed a signal): the signal sought is
#: then weak, so the certificate plays the whole budget rather than stop once the verdict is settled
BY_EXACT = "the exact loss on the pair of the largest exact ε"


# ---------------------------------------------------------------------------------------------
# the held-out pilot statistic
# ---------------------------------------------------------------------------------------------
def heldout_statistic(out_s: np.ndarray, in_s: np.ndarray, *, delta: float, confidence: float) -> dict[str, Any]:
    """Direction and cp threshold chosen on the first half of each world's trials (index order);
    the cp lower bound at that threshold, and the AUC, on the second half. Beside it the same for
    ``gdp`` (its own threshold rule on the first half, its bound on the second), which the portfolio
    reads only where gdp is valid for the candidate (:func:`gdp_valid`)."""
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


def rank(row: dict[str, Any]) -> tuple[float, float]:
    """A pilot's held-out statistic: its cp bound, or its gdp or family-fit bound where that estimator
    is valid and larger."""
    gdp = row.get("heldout_gdp_eps_lb", 0.0) if row.get("gdp_valid") else 0.0
    family = row.get("heldout_family_eps_lb", 0.0) if row.get("family_valid") else 0.0
    return max(row["heldout_eps_lb"], gdp, family), row["heldout_auc"]


def act_on_deviation(level: str, failed: str, pool: list[Candidate], rows: list[dict[str, Any]],
                      keep: Callable[[str], bool] = lambda name: False,
                      tests: set[str] | None = None) -> list[Candidate]:
    """The declared model failed its check at `level`: no score there may rest on it any longer.
    Its pilots already played are set aside, those still to play are dropped, and the scores that
    exploit the deviation (``Attack.exploits``: the named test, or any deviation for the learned
    distinguisher) move to the front of the order. Returns the new order of what is left. `keep`:
    the scores kept though they read the model, where the check found only the std off and the
    score is linear in the release (a statistic whose law is then still a Gaussian of one
    variance in both worlds, :func:`gdp_valid`; its threshold is held out). `tests`: the failed tests'
    names (:func:`failed_tests`); else read off `failed`, each ``name: detail`` line."""
    why = f"the declared model failed its check at the {level} view ({failed})"
    tests = tests or {line.split(":")[0].strip() for line in failed.split(";")}

    def rests(c: Candidate | dict[str, Any]) -> bool:
        name, lvl = (c.attack, c.level) if isinstance(c, Candidate) else (c["attack"], c["level"])
        return lvl == level and attacks.get(name).rests_on_declared_model() and not keep(name)

    for r in rows:
        if r["status"] == PILOTED and rests(r):
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


def choose(piloted: list[dict[str, Any]], first: Candidate) -> tuple[Candidate, str]:
    if not piloted:
        return first, "no pilot could be played: the first candidate in priority order"
    best = max(piloted, key=rank)  # max keeps the earliest (highest priority) of equals
    cand = Candidate(best["level"], best["attack"], best["canary"])
    others = sorted((rank(r) for r in piloted if r is not best), reverse=True)
    runner = f"; runner-up {others[0][0]:.3f} / AUC {others[0][1]:.3f}" if others else ""
    top = rank(best)[0]
    if top <= 0:
        exact = [r for r in piloted if (r.get("pair_exact_eps") or 0.0) > 0]
        if exact:  # the most powerful test (an exact loss) of the pair with the most ε, chosen before any trial
            best = max(exact, key=lambda r: r["pair_exact_eps"])
            return Candidate(best["level"], best["attack"], best["canary"], by_exact_eps=best["pair_exact_eps"]), (
                f"no pilot of {len(piloted)} certified anything on its held-out half: {BY_EXACT}, "
                f"{best['pair_exact_eps']:.4g} (from the pair's record, before any trial)")
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


def estimator(spec: game.AuditSpec, piloted: list[dict[str, Any]], winner: Candidate) -> tuple[str, str]:
    """The certification's estimator, chosen on the winner's held-out pilot trials: ``gdp`` where it
    is valid (:func:`gdp_valid`) and its held-out bound is not below cp's; else the run's own
    (``auto``). A tie at 0 (neither certifies on the pilot's held-out half, a weak signal) goes to gdp:
    where valid it reads the whole Gaussian curve, cp one point of it, and a weak signal certifies
    something only that way (GAP's directed-edge finding at ε = 1: gdp 1.07, cp 0.24)."""
    row = next((r for r in piloted if (r["level"], r["attack"], r["canary"]) ==
                (winner.level, winner.attack, winner.canary)), None)
    if spec.estimator == Method.AUTO and row is not None and row.get("family_valid"):
        # the fit against gdp only: on a trace of the family it reads the whole curve where cp reads one point, so
        # cp's held-out bound on a pilot of ~100 trials a world, against the fit's on its 20 % selection share,
        # says which pilot was luckier, not which certificate will be stronger (issue #45's table: at 2,000
        # trials a world cp 0.32-0.50, the fit 0.95-1.37); cp is reported beside the fit, and certifies where
        # the sampler checks fail
        family = row.get("heldout_family_eps_lb", 0.0)
        gdp = row["heldout_gdp_eps_lb"] if row.get("gdp_valid") else 0.0
        if family >= gdp:
            return FAMILY, (f"the subsampled-Gaussian family fit ({row['family_valid']}): its pilot bound {family:.3f} "
                            f"(cp's held-out {row['heldout_eps_lb']:.3f}"
                            + (f", gdp's {gdp:.3f}" if row.get("gdp_valid") else "")
                            + "); certified only where the sampler checks pass, cp beside it")
    if spec.estimator != Method.AUTO or row is None or not row.get("gdp_valid"):
        return spec.estimator, "the run's estimator (gdp is not valid for the winner, or it was named)"
    if row["heldout_gdp_eps_lb"] < row["heldout_eps_lb"]:
        return spec.estimator, (f"the run's estimator: gdp's held-out bound {row['heldout_gdp_eps_lb']:.3f} is below "
                                f"cp's {row['heldout_eps_lb']:.3f}")
    how = "beats" if row["heldout_gdp_eps_lb"] > row["heldout_eps_lb"] else "ties"
    return "gdp", (f"gdp ({row['gdp_valid']}): its held-out bound {row['heldout_gdp_eps_lb']:.3f} {how} cp's "
                   f"{row['heldout_eps_lb']:.3f} on the winner's pilot")


def direction(piloted: list[dict[str, Any]], winner: Candidate) -> float:
    for r in piloted:
        if (r["level"], r["attack"], r["canary"]) == (winner.level, winner.attack, winner.canary):
            return 1.0 if r["direction"] == "higher = IN" else -1.0
    return 1.0
