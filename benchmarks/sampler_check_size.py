"""Size of the sampler checks (``audit/stats/sampler_check.py``) on true Poisson records, against the χ²
laws they replaced (issue #45): refusals of each check at level α over simulated seeds, on the shapes of the
default's correct DP-SGD targets; and, at the full default (α = 10⁻³), how often the χ² checks and the exact
ones decide differently. Results: ``benchmarks/sampler_check_size.md``.

    python benchmarks/sampler_check_size.py size --alpha 0.001 --reps 2000 --shape 175 8 180 0.99444
    python benchmarks/sampler_check_size.py disagree --reps 300
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import chi2

from audit.stats.sampler_check import check_node_scales, check_sampler

#: (releases, steps, N, q) for the size: GAP's Poisson encoder at the default (B = N − 1 on csbm's 180 training
#: nodes, T = 8), q = 0.1 on Cora's N, q = 0.5, and the catalogue's GAP loader (100 releases × 16 steps)
SHAPES = [(175, 8, 180, 179 / 180), (175, 20, 2708, 0.1), (120, 4, 400, 0.5), (100, 16, 180, 179 / 180)]
#: for the disagreement at the default: DPSGD-GCN at q = 0.1 (1,000 releases × T = 20) and its twin (T = 10),
#: GAP's Poisson encoder
DISAGREE = [(1000, 20, 180, 0.1), (1000, 10, 180, 0.1), (175, 8, 180, 179 / 180)]


def chi2_dispersion_refuses(inc: np.ndarray, alpha: float) -> bool:
    """The dispersion test before the fix: Σ(K − T q̂)²/(T q̂(1 − q̂)) against χ²(n − 1), both tails."""
    n, steps = inc.shape
    q = inc.mean()
    if not 0 < q < 1:
        return False
    d = ((inc.sum(1) - steps * q) ** 2).sum() / (steps * q * (1 - q))
    return bool(chi2.sf(d, n - 1) < alpha / 2 or chi2.cdf(d, n - 1) < alpha / 2)


def chi2_batch_refuses(inc: np.ndarray, sizes: np.ndarray, population: int, q_level: float, alpha: float) -> bool:
    """The batch-size test before the fix: (n − 1)s²/(Nq(1 − q)) against χ², for every q in q's interval."""
    from audit.stats.estimators import subsampled_fit
    lo, hi = subsampled_fit.inclusion_interval(inc, q_level)
    var, df = float(sizes.var(ddof=1)), sizes.size - 1
    ends = [population * x * (1 - x) for x in (lo, hi, *((0.5,) if lo < 0.5 < hi else ()))]
    low, high = min(ends), max(ends)
    return bool((high > 0 and chi2.sf(df * var / high, df) < alpha / 2)
                or (low > 0 and chi2.cdf(df * var / low, df) < alpha / 2) or (high == 0 and var > 0))


def size(shape: tuple[int, int, int, float], alpha: float, reps: int) -> str:
    n, steps, population, q = shape
    start, new_b, new_d, old_b, old_d = time.time(), 0, 0, 0, 0
    for seed in range(reps):
        rng = np.random.default_rng(1000 + seed)
        inc, sizes = rng.random((n, steps)) < q, rng.binomial(population, q, (n, steps))
        c = check_sampler(inc, sizes, population=population, alpha=alpha)
        new_b += any("batch-size" in f for f in c.failures)
        new_d += any("independent" in f for f in c.failures)
        old_b += chi2_batch_refuses(inc, sizes, population, 0.005, alpha)
        old_d += chi2_dispersion_refuses(inc, alpha)
    return (f"| {n} × {steps}, N = {population}, q = {q:.4g} | {alpha:g} | {reps} | {new_b} | {new_d} | {old_b} | "
            f"{old_d} | {time.time() - start:.0f} |")


def disagree(shape: tuple[int, int, int, float], reps: int) -> str:
    from audit.stats import sampler_check
    n, steps, population, q = shape
    diff = old = new = 0
    for s in range(reps):
        rng = np.random.default_rng(50_000 + s)
        inc, sizes = rng.random((n, steps)) < q, rng.binomial(population, q, (n, steps))
        a = not (chi2_batch_refuses(inc, sizes, population, 0.005, sampler_check.ALPHA)
                 or (steps > 1 and chi2_dispersion_refuses(inc, sampler_check.ALPHA)))
        b = check_sampler(inc, sizes, population=population, declared_q=q, q_level=0.005).ok
        diff, old, new = diff + (a != b), old + (not a), new + (not b)
    return f"| {n} × {steps}, N = {population}, q = {q:.4g} | {reps} | {old} | {new} | {diff} |"


def node_disagree(n: int, steps: int, p: float, reps: int) -> str:
    """Whole-node scales {0, 1} at P(k ≠ 0) = p: refusals of the exact check (the χ²(n) dispersion it replaced is
    not rerun here; its Pearson part is unchanged)."""
    values, probs = np.array([0.0, 1.0]), np.array([1 - p, p])
    refused = sum(bool(check_node_scales((np.random.default_rng(70_000 + s).random((n, steps)) < p).astype(float),
                                         values=values, probs=probs)) for s in range(reps))
    return f"| whole-node scales {n} × {steps}, p = {p:g} | {reps} | {refused} |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["size", "disagree"])
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--reps", type=int, default=400)
    p.add_argument("--shape", nargs=4, type=float, default=None, metavar=("RELEASES", "STEPS", "N", "Q"))
    args = p.parse_args()
    default = SHAPES if args.what == "size" else DISAGREE
    shapes = [(int(args.shape[0]), int(args.shape[1]), int(args.shape[2]), args.shape[3])] if args.shape else default
    for shape in shapes:
        print(size(shape, args.alpha, args.reps) if args.what == "size" else disagree(shape, args.reps), flush=True)
    if args.what == "disagree" and not args.shape:
        print(node_disagree(400, 3, 0.5, args.reps))


if __name__ == "__main__":
    main()
