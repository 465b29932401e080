"""Verdict reliability of the real audit on the Gaussian reference mechanism.

Not a test: a benchmark that prints a markdown table. For each seed, bug (none, "half-noise")
and estimator (cp, gdp) it runs the CLI-equivalent ``run_audit(AuditSpec(target="gaussian",
epsilon=2, trials=2000, seed=s, bug=b, estimator=m))`` into a fresh temporary out-dir (so no
trials are reused from an earlier store) and reports the fraction of seeds with verdict
VIOLATION and the median ε_lb.

With half-noise the noise std is halved, so μ doubles and the true ε is gdp_epsilon(2μ, δ) ≈ 4.4.

It also prints the exact false-alarm probability of the gdp verdict on the correct mechanism:
with the LLR's a-priori threshold 0 the pooled error count is Binomial(trials, Φ(−μ/2)), so
P(VIOLATION) = P(CP upper bound at β < Φ(−μ/2)) is a finite sum — the rate a seed count estimates.

Usage: python benchmarks/verdicts.py [--seeds 20] [--epsilon 2] [--trials 2000]
       [--bugs none,half-noise] [--methods cp,gdp]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

BUGS = (None, "half-noise")
METHODS = ("cp", "gdp")


def _row(cells: list[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def exact_false_alarm(mu: float, trials: int, beta: float) -> float:
    """P(the gdp bound exceeds μ) when every trial is scored by the exact LLR at threshold 0."""
    from scipy.stats import binom, norm

    from audit.stats.estimators import cp_upper_vec

    p = float(norm.cdf(-mu / 2))
    k = np.arange(trials + 1)
    return float(binom.pmf(k, trials, p)[cp_upper_vec(k, trials, beta) < p].sum())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 (default 20)")
    p.add_argument("--epsilon", type=float, default=2.0)
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--bugs", default="none,half-noise", help="comma-separated: none, half-noise")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated estimators")
    p.add_argument("--confidence", type=float, default=0.95)
    args = p.parse_args(argv)
    bugs = [None if b == "none" else b for b in args.bugs.split(",")]
    methods = args.methods.split(",")

    import torch

    from audit.play.game import AuditSpec, run_audit
    from targets.common.accounting import gdp_epsilon, gdp_mu

    torch.set_num_threads(1)
    t0 = time.time()
    delta = 1e-5
    mu = gdp_mu(args.epsilon, delta)
    true_eps = {None: gdp_epsilon(mu, delta), "half-noise": gdp_epsilon(2 * mu, delta)}
    res: dict[tuple[str | None, str], list[tuple[str, float, float]]] = {}
    for b in bugs:
        for m in methods:
            rows = []
            for s in range(args.seeds):
                with tempfile.TemporaryDirectory(prefix="verdicts-") as d:
                    r = run_audit(AuditSpec(target="gaussian", epsilon=args.epsilon, trials=args.trials, seed=s,
                                            bug=b, estimator=m, confidence=args.confidence),
                                  out=d, progress=False)
                rows.append((r.verdict, float(r.eps_lb), float(r.claimed_epsilon)))
            res[(b, m)] = rows

    n = args.seeds
    print(f"## Verdicts: target gaussian, claimed ε = {args.epsilon:g}, δ = {delta:g}, {args.trials:,} trials, "
          f"seeds 0..{n - 1}\n")
    print("Fresh temporary out-dir per run (no reuse of stored trials).\n")
    print(_row(["bug", "true ε", "estimator", "VIOLATION", "CONSISTENT", "median ε_lb", "min ε_lb",
                "max ε_lb", "ε_lb > true ε"]))
    print(_row(["---"] * 9))
    for (b, m), rows in res.items():
        viol = sum(v == "VIOLATION" for v, _, _ in rows)
        lbs = np.array([lb for _, lb, _ in rows])
        above = int((lbs > true_eps[b] * (1 + 1e-9)).sum())
        print(_row([b or "none", f"{true_eps[b]:.3f}", m, f"{viol}/{n} ({viol / n:.0%})",
                    f"{n - viol}/{n}", f"{np.median(lbs):.3f}", f"{lbs.min():.3f}", f"{lbs.max():.3f}",
                    f"{above}/{n}"]))
    print(f"\nExact P(VIOLATION) of gdp on the correct mechanism (a-priori threshold): "
          f"{exact_false_alarm(mu, args.trials, 1 - args.confidence):.4f} (β = {1 - args.confidence:g})")
    claimed = sorted({round(c, 9) for rows in res.values() for _, _, c in rows})
    print(f"\nClaimed ε reported by the runs: {claimed}")
    print(f"Wall time: {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
