"""cp on HeterPoisson's whole-node pair (q = 0.5, 3 Gaussian steps, claim ε = 2), simulated from its exact law:
the Bonferroni grid over both orders (cp's default) against the one a-priori false-positive share
(:func:`audit.stats.estimators.cp_every_trial.cp_at_rank`, the share from :func:`audit.stats.pair_prior.prior_fraction`),
(``--fit``) the whole-node curve fit (:mod:`audit.stats.estimators.node_fit`) on the same draws, and
(``--at-share``) that family's fit at the same a-priori share (``node_fit.fit_at_share``, the default's), with the
share of runs whose bound exceeds the exact ε (at most β = 0.05 in expectation: it is a size check too).

The pair: k_t of a node with `--t` training out-neighbours kept with probability `--p` (node_curve's law), the
exact LLR given k_t, N(±m/2, m) with m = (C/s)²·Σ_t k_t². No target runs: what the estimators can reach at a
trial count, for the issue's "median ≥ 0.8 of the exact ε" and "ε_lb > 0 on 15 of 20 seeds".

    python benchmarks/heterpoisson_rank_sim.py --per-world 7000 --reps 100
    python benchmarks/heterpoisson_rank_sim.py --per-world 250000 --reps 20 --t 4 --p 0.2 --fit
    python benchmarks/heterpoisson_rank_sim.py --per-world 6817 --reps 200 --t 4 --p 0.2 --at-share
"""
from __future__ import annotations

import argparse

import numpy as np

from audit.stats import node_curve, pair_prior
from audit.stats.estimators import node_fit
from audit.stats.estimators.cp_every_trial import cp_at_rank, cp_both_tails


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-world", type=int, default=7000)
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--t", type=int, default=18)
    p.add_argument("--p", type=float, default=1 / 18)
    p.add_argument("--fit", action="store_true", help="also the whole-node curve fit on the same draws")
    p.add_argument("--at-share", action="store_true", help="also the whole-node fit at the a-priori share")
    args = p.parse_args()
    q, c, std, steps, delta = 0.5, 0.5, 15.93, 3, 0.003305
    record = {"noise": "gaussian", "noise_std": std, "sampling_rate": q, "magnitude": c, "node": 0,
              "node_training_out_degree": args.t, "node_keep_probability": args.p, "node_scale_recorded": True}
    exact = node_curve.epsilon(noise_std=std, magnitude=c, q=q, t=args.t, p=args.p, steps=steps, delta=delta)[0]
    n = args.per_world
    share, expected = pair_prior.prior_fraction(record, steps, n, n, delta, 0.95)
    grid, rank, fit, at_share = [], [], [], []
    for r in range(args.reps):
        out, inn = pair_prior.law_scores(record, steps, n=n, seed=1000 + r)
        grid.append(cp_both_tails(out, inn, delta, 0.05, seed=r)[0])
        rank.append(cp_at_rank(out, inn, delta, 0.05, share, seed=r)[0])
        if args.fit:
            fit.append(node_fit.fit(out, inn, delta=delta, steps=steps, q=q, t=args.t, p=args.p, seed=r).eps_lb)
        if args.at_share:
            at_share.append(node_fit.fit_at_share(out, inn, delta=delta, steps=steps, q=q, t=args.t, p=args.p,
                                                  fraction=share, seed=r).eps_lb)
    print(f"exact ε {exact:.4f}; {n:,} trials a world, {args.reps} reps; a-priori share {share:.4g} "
          f"(expected bound {expected:.4f})")
    print("| estimator | ε_lb > 0 | median ε_lb | median / exact | lower quartile | above the exact ε |")
    print("|---|---|---|---|---|---|")
    rows = [("cp, grid, both orders", grid), ("cp at one a-priori share", rank)] \
        + ([("whole-node curve fit", fit)] if fit else []) + ([("whole-node fit at the share", at_share)] if at_share else [])
    for name, b in ((name, np.array(b)) for name, b in rows):
        print(f"| {name} | {np.mean(b > 0):.2f} | {np.median(b):.4f} | {np.median(b) / exact:.2f} | "
              f"{np.quantile(b, 0.25):.4f} | {np.mean(b > exact):.3f} |")


if __name__ == "__main__":
    main()
