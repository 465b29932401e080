"""Validity of every ε lower bound on mechanisms with known ε (issue #24).

For each estimator × mechanism: the share of repetitions whose bound exceeds the true ε (a valid
bound at 95% confidence: ≤ 5%, ≤ 8% with Monte-Carlo slack over ≥ 200 reps) and the median bound.

    /work/main/.venv/bin/python benchmarks/estimator_validity.py [--reps 200] [--n 1000]

Mechanisms (δ = 1e-5): Gaussian (OUT ~ N(0,1), IN ~ N(μ,1), true ε = ε_GDP(μ, δ)); Laplace
(OUT ~ Lap(0, 1/ε0), IN ~ Lap(1, 1/ε0): true ε(δ) = ε0 + 2 ln(1 − δ)); randomized response with
p = e^ε0/(1 + e^ε0) (true ε(δ) = ln((p − δ)/(1 − p))). ``gdp`` assumes a Gaussian trade-off and is
shown on Laplace / RR to document why it is gated; ``auto`` is the gated path for a μ-GDP claim
(held-out shape check, cp fallback). One-run rows: m = 1,000 canaries with scores from the same
laws, each canary in with probability ½; one-run-fdp's ε is the Gaussian curve's (it rejects μ-GDP
claims), so like gdp it is a validity claim only on the Gaussian row. ``bayes`` uses 100,000
posterior draws (the library default is 1,000,000: the same bound up to Monte-Carlo error, ~15×
slower). Every table has a random-ε column: ε0 ~ U[0.5, 4.5] drawn per repetition.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from audit.stats import estimators as est  # noqa: E402
from audit.stats.shape_check import auto_estimate  # noqa: E402
from audit.stats.estimators.known import gaussian, laplace  # noqa: E402
from audit.stats.estimators.known import randomized_response as rr  # noqa: E402

DELTA = 1e-5
MECH = {"gaussian": (gaussian, 2.49), "laplace": (laplace, 1.37), "rr": (rr, 1.3)}


def run_multi(method, mech, reps, n, rng, random_eps):
    f, eps0 = MECH[mech]
    over, bounds = 0, []
    for r in range(reps):
        e0 = float(rng.uniform(0.5, 4.5)) if random_eps else eps0
        out, inn, truth = f(rng, n, e0)
        if method == "auto":
            b = auto_estimate(out, inn, delta=DELTA, claim_is_gdp=True, seed=r)[0].eps_lb
        else:
            b = est.estimate(out, inn, delta=DELTA, method=method, seed=r, samples=100_000).eps_lb
        over += b > truth
        bounds.append(b / truth if random_eps else b)
    return over / reps, float(np.median(bounds))


def run_one_run(method, mech, reps, rng, random_eps):
    f, eps0 = MECH[mech]
    over, bounds = 0, []
    for _ in range(reps):
        e0 = float(rng.uniform(0.5, 4.5)) if random_eps else eps0
        out, inn, truth = f(rng, 1000, e0)
        bit = rng.random(1000) < 0.5
        y = np.where(bit, inn, out)
        b = est.estimate(y[~bit], y[bit], delta=DELTA, method=method).eps_lb
        over += b > truth
        bounds.append(b / truth if random_eps else b)
    return over / reps, float(np.median(bounds))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--n", type=int, default=1000, help="trials per world")
    p.add_argument("--one-run-reps", type=int, default=200)
    p.add_argument("--seq-reps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", default="cp,fdp,gdp,auto,bayes")
    p.add_argument("--bayes-reps", type=int, default=None, help="reps for bayes (default: --reps)")
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    methods = [m for m in a.methods.split(",") if m]
    if methods:
        print(f"## multi-run estimators, {a.n} trials per world, δ = 1e-5, 95% confidence, {a.reps} reps\n")
        print("| estimator | mechanism | true ε | share ε_lb > ε | median ε_lb | share > ε (ε ~ U[0.5, 4.5]) | median ε_lb/ε |")
        print("|---|---|---|---|---|---|---|")
    for method in methods:
        for mech in MECH:
            t0 = time.time()
            reps = a.reps if method != "bayes" or a.bayes_reps is None else a.bayes_reps
            fixed = run_multi(method, mech, reps, a.n, rng, False)
            rand = run_multi(method, mech, reps, a.n, rng, True)
            truth = MECH[mech][0](np.random.default_rng(0), 2, MECH[mech][1])[2]
            print(f"| {method} | {mech} | {truth:.3f} | {fixed[0]:.3f} | {fixed[1]:.3f} | {rand[0]:.3f} | {rand[1]:.3f} |"
                  + (f" ({reps} reps)" if reps != a.reps else ""), flush=True)
            print(f"  {method} {mech}: {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    if a.seq_reps:
        print(f"\n## SequentialAudit (cp, looks at 250·2^j up to 4,000 per world), {a.seq_reps} reps\n")
        print("| mechanism | claim | true ε | share 'violation' | share stopped before 4,000 | mean trials/world used |")
        print("|---|---|---|---|---|---|")
        for mech in MECH:
            f, eps0 = MECH[mech]
            for label in ("truth", "truth/3"):
                viol = early = used = 0
                for _ in range(a.seq_reps):
                    out, inn, truth = f(rng, 4000, eps0)
                    claim = truth if label == "truth" else truth / 3
                    sa = est.SequentialAudit(DELTA, claim, max_trials=4000)
                    for n in sa.looks:
                        d = sa.look(out[:n], inn[:n])
                        if d.stop:
                            break
                    viol += d.verdict == "violation"
                    early += d.n < 4000
                    used += d.n
                r = a.seq_reps
                print(f"| {mech} | {label} | {truth:.3f} | {viol / r:.3f} | {early / r:.3f} | {used / r:.0f} |", flush=True)
    if not a.one_run_reps:
        return
    print(f"\n## one run, m = 1,000 canaries, {a.one_run_reps} reps\n")
    print("| estimator | mechanism | true ε | share ε_lb > ε | median ε_lb | share > ε (ε ~ U[0.5, 4.5]) | median ε_lb/ε |")
    print("|---|---|---|---|---|---|---|")
    for method in ("one-run", "one-run-fdp"):
        for mech in MECH:
            fixed = run_one_run(method, mech, a.one_run_reps, rng, False)
            rand = run_one_run(method, mech, a.one_run_reps, rng, True)
            truth = MECH[mech][0](np.random.default_rng(0), 2, MECH[mech][1])[2]
            print(f"| {method} | {mech} | {truth:.3f} | {fixed[0]:.3f} | {fixed[1]:.3f} | {rand[0]:.3f} | {rand[1]:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
