"""Our estimators against jax_privacy's on identical scores (issue #24).

Run with an interpreter that has jax-privacy (``python3 -m venv /tmp/jaxenv &&
/tmp/jaxenv/bin/pip install jax-privacy numpy scipy``) from the repository root:

    /tmp/jaxenv/bin/python benchmarks/estimators_vs_peers.py [--reps 50]

Without jax_privacy, the CP baseline is our re-implementation of its documented default
(``CanaryScoreAuditor.epsilon_clopper_pearson``: one-sided, every Pareto-frontier threshold of the
pooled scores, Bonferroni over their number, CP at β/2 per rate), and the one-run rows are skipped.
Gaussian scores: OUT ~ N(0, 1), IN ~ N(μ, 1), μ the GDP parameter of the true ε at δ = 1e-5.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attacks.metrics import rates_at  # noqa: E402
from audit.stats import estimators as est  # noqa: E402
from targets.common.accounting import gdp_mu  # noqa: E402

DELTA = 1e-5
try:
    from jax_privacy.auditing import CanaryScoreAuditor
    HAVE_JAX = True
except ImportError:  # pragma: no cover
    HAVE_JAX = False


def baseline_cp(out: np.ndarray, inn: np.ndarray, beta: float = 0.05) -> float:
    if HAVE_JAX:
        return float(CanaryScoreAuditor(inn, out).epsilon_clopper_pearson(beta, DELTA))
    t = np.concatenate([np.union1d(out, inn), [np.inf]])
    fp, fn = rates_at(out, inn, t)
    b = beta / t.size / 2
    fpr, fnr = est.cp_upper_vec(fp, out.size, b), est.cp_upper_vec(fn, inn.size, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.log(np.clip(1 - fnr - DELTA, 0, None)) - np.log(fpr)
    return max(0.0, float(np.nanmax(e)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--one-run-reps", type=int, default=10)
    p.add_argument("--jax-one-run", action="store_true", help="also jax_privacy's one-run f-DP (slow)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    name = "jax_privacy " + ("(installed)" if HAVE_JAX else "(re-implemented: not installed)")
    print(f"## cp vs {name} Clopper–Pearson, Gaussian scores, δ = 1e-5, β = 0.05, {a.reps} reps, median ε_lb\n")
    print("| true ε | trials/world | ours cp | ours fdp | old cp (50% split) | peer CP | ours ≥ peer |")
    print("|---|---|---|---|---|---|---|")
    for eps in (1.0, 2.49, 4.4):
        mu = gdp_mu(eps, DELTA)
        for n in (1000, 5000):
            rows = {"cp": [], "fdp": [], "old": [], "peer": []}
            for r in range(a.reps):
                out, inn = rng.standard_normal(n), rng.standard_normal(n) + mu
                rows["cp"].append(est.estimate(out, inn, delta=DELTA, method="cp").eps_lb)
                rows["fdp"].append(est.estimate(out, inn, delta=DELTA, method="fdp").eps_lb)
                rows["old"].append(est.estimate(out, inn, delta=DELTA, method="cp", select_fraction=0.5, seed=r).eps_lb)
                rows["peer"].append(baseline_cp(out, inn))
            m = {k: float(np.median(v)) for k, v in rows.items()}
            print(f"| {eps} | {n} | {m['cp']:.3f} | {m['fdp']:.3f} | {m['old']:.3f} | {m['peer']:.3f} | "
                  f"{'yes' if m['cp'] >= m['peer'] else 'no'} |", flush=True)
    if not a.one_run_reps:
        return
    print(f"\n## one run, 1,000 canaries, Gaussian, {a.one_run_reps} reps, median ε_lb\n")
    print("| true ε | ours f-DP | Steinke, same guesses | ratio | Steinke, two-sided `one-run` | jax f-DP |")
    print("|---|---|---|---|---|---|")
    for eps in (2.49, 4.4, 10.0):
        mu = gdp_mu(eps, DELTA)
        f, s, s2, j = [], [], [], []
        for _ in range(a.one_run_reps):
            b = rng.random(1000) < 0.5
            y = rng.standard_normal(1000) + mu * b
            e = est.one_run_fdp(y[~b], y[b], delta=DELTA)
            f.append(e.eps_lb)
            s.append(e.counts["steinke_eps"])
            s2.append(est.estimate(y[~b], y[b], delta=DELTA, method="one-run").eps_lb)
            if HAVE_JAX and a.jax_one_run:
                j.append(CanaryScoreAuditor(y[b], y[~b]).epsilon_one_run_fdp(0.05, DELTA))
        jm = f"{np.median(j):.3f}" if j else "—"
        print(f"| {eps} | {np.median(f):.3f} | {np.median(s):.3f} | {np.median(f) / max(np.median(s), 1e-9):.2f} | "
              f"{np.median(s2):.3f} | {jm} |", flush=True)


if __name__ == "__main__":
    main()
