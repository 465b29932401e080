"""``cp`` on every trial (:mod:`audit.stats.estimators.core`'s default ``cp``): a grid of OUT-rank
thresholds fixed before any score is seen, one exact joint test of (FPR, TPR) per threshold, Bonferroni
over the grid (:func:`cp_grid`), on both orders of the score (:func:`cp_both_tails`), ties broken at
random (:func:`_tie_broken`); the same test at one count fixed a priori (:func:`cp_at_rank`); and the
bound a perfect attack would get (:func:`cp_grid_max`).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as beta_dist

from attacks.metrics import rates_at as _rates_at


_CP_GRID_RATIO = 2.0    # consecutive false-positive counts of cp's threshold grid differ by this factor
_CP_TWO_SIDED = False   # cp spends its whole β on the "s ≥ t says IN" direction (see cp_grid)
#: the share of β that cp and fdp spend on the reversed order ("lower score means IN"): both tails
#: are tested and paid for (Bonferroni), so a score whose order a deviation reversed still certifies
REVERSED_SHARE = 0.1
_CP_MID = (0.19, 0.35)  # extra OUT false-positive fractions in cp's grid (low ε: the best FPR is large)


def count_grid(n: int, ratio: float = _CP_GRID_RATIO, limit: float = 0.5) -> np.ndarray:
    """0, 1, 2, … then counts growing geometrically by `ratio`; all below max(1, limit·n).

    The default limit n/2: the "s ≥ t says IN" inequality of §0 is best at FPR below the
    trade-off curve's symmetric point, which is ≤ 1/2."""
    if n <= 0:
        return np.zeros(0, dtype=int)
    ks, x = {0}, 1.0
    while x < max(1.0, limit * n):
        ks.add(int(x))
        x = max(x * ratio, x + 1.0)
    return np.array(sorted(ks), dtype=int)


def cp_counts(n: int, ratio: float = _CP_GRID_RATIO) -> np.ndarray:
    """cp's OUT false-positive counts: :func:`count_grid` and the fractions ``_CP_MID`` of n."""
    ks = count_grid(n, ratio)
    if n > 0:
        ks = np.unique(np.concatenate([ks, np.floor(np.asarray(_CP_MID) * n).astype(int)]))
    return ks[(ks >= 0) & (ks < max(n, 1))]


_MIX_LEVELS = np.unique(np.concatenate([np.linspace(0.0, 1.0 - 1e-3, 1000), 1.0 - np.logspace(-3, -12, 200), [1.0]]))


@functools.lru_cache(maxsize=128)
def mix_nodes(n_out: int, ks: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature of V ~ Beta(k + 1, n_out − k) for each k: bin masses (the steps of ``_MIX_LEVELS``)
    and each bin's upper quantile (the last bin's upper end is 1)."""
    w = np.diff(_MIX_LEVELS)
    q = beta_dist.ppf(_MIX_LEVELS[1:][None, :], np.asarray(ks)[:, None] + 1, n_out - np.asarray(ks)[:, None])
    q[:, -1] = 1.0
    return w, np.nan_to_num(q, nan=1.0)


def mix_p_value(eps: np.ndarray, tp: np.ndarray, n_in: int, w: np.ndarray, q: np.ndarray,
                 delta: float) -> np.ndarray:
    """Upper bound on P(Bin(n_in, min(1, e^ε V + δ)) ≥ tp), V ~ Beta(k + 1, n_out − k), per row.

    An upper Riemann sum over `mix_nodes`' bins (the tail is increasing in V), so never below the
    exact value."""
    return binomial_tail_mix(np.minimum(1.0, np.exp(eps)[:, None] * q + delta), tp, n_in, w)


def binomial_tail_mix(rates: np.ndarray, tp: np.ndarray, n_in: int, w: np.ndarray) -> np.ndarray:
    """Σ_j w_j · P(Bin(n_in, rates[i, j]) ≥ tp[i]) per row i: a true-positive count's tail mixed over the
    quadrature bins of V (`w` their masses, `rates` the TPR bound at each bin's upper end)."""
    from scipy.special import betainc
    t = np.asarray(tp, dtype=float).reshape(-1, 1)
    s = betainc(np.maximum(t, 1.0), np.maximum(n_in - t + 1.0, 1e-300), np.clip(rates, 0.0, 1.0))
    s = np.where(t <= 0, 1.0, np.where(t > n_in, 0.0, s))
    return (s * w).sum(axis=1)


def mix_eps(tp: np.ndarray, ks: np.ndarray, n_out: int, n_in: int, delta: float, level: float) -> np.ndarray:
    """Per grid count k: sup{ε ≥ 0 : the test of k rejects (ε, δ)-DP at `level`} (0 if none)."""
    w, q = mix_nodes(int(n_out), tuple(int(k) for k in ks))
    tp = np.asarray(tp)
    lo, hi = np.zeros(ks.size), np.full(ks.size, 40.0)
    ok = mix_p_value(lo, tp, n_in, w, q, delta) <= level
    for _ in range(32):  # 40 / 2^32: ε to 1e-8
        mid = 0.5 * (lo + hi)
        r = mix_p_value(mid, tp, n_in, w, q, delta) <= level
        lo, hi = np.where(r, mid, lo), np.where(r, hi, mid)
    return np.where(ok, lo, 0.0)


def _cp_one_direction(out: np.ndarray, inn: np.ndarray, delta: float, beta: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ε per grid count, thresholds, FP, FN) for "s ≥ t says IN" at total level β (see cp_grid)."""
    n0, n1 = out.size, inn.size
    ks = cp_counts(n0)
    thresholds = np.nextafter(np.sort(out)[n0 - 1 - ks], np.inf)
    fp, fn = _rates_at(out, inn, thresholds)
    return mix_eps(n1 - fn, ks, n0, n1, delta, beta / ks.size), thresholds, fp, fn


def cp_grid(out: np.ndarray, inn: np.ndarray, delta: float, beta: float,
             two_sided: bool = _CP_TWO_SIDED) -> tuple[float, float, int, int]:
    """cp on every trial: (ε lower bound, threshold, FP, FN) at the best threshold of a grid.

    The grid is anchored on the OUT world's order statistics: for each count k of a fixed grid K
    (:func:`cp_counts`, chosen before any score is seen), t_k is the lowest threshold with at
    most k OUT scores ≥ t_k. For each k one exact test of "(ε, δ)-DP", at level β/|K| (Bonferroni
    over K):

    * OUT: write each OUT score as Q(U_i), Q the law's quantile function and U_i iid uniform (any
      law, ties included); the scores ≥ t are those with U_i above a cut, so N_out(t_k) ≤ k gives
      FPR(t_k) ≤ V_(k+1), the (k+1)-th smallest of V_i = 1 − U_i, and V_(k+1) ~ Beta(k + 1, n_out − k).
    * IN: t_k is a function of the OUT scores alone, independent of the IN scores; given it,
      TP(t_k) ~ Binomial(n_in, TPR(t_k)), and (ε, δ)-DP gives TPR(t_k) ≤ e^ε FPR(t_k) + δ ≤
      e^ε V_(k+1) + δ. So TP(t_k) is stochastically below Y ~ Binomial(n_in, min(1, e^ε V + δ)),
      V ~ Beta(k + 1, n_out − k), and P(Y ≥ TP) (:func:`mix_p_value`, an upper bound by quadrature)
      is a valid p-value.

    This is one joint test of the pair (FPR, TPR) per threshold — not a Clopper–Pearson rectangle
    (an upper bound on FPR and one on FNR, each at its own share of β), which spends β on both
    tails separately. ε is the largest ε rejected at some k. `two_sided` adds the mirrored test
    (IN and OUT swapped, scores negated: the other §0 inequality), each direction at β/2.
    """
    if two_sided:
        a = cp_grid(out, inn, delta, beta / 2)
        b = cp_grid(-inn, -out, delta, beta / 2)
        if b[0] > a[0]:  # report the mirrored threshold in the original orientation ("s ≤ t says IN")
            return b[0], -b[1], b[3], b[2]
        return a
    n0, n1 = out.size, inn.size
    eps, thresholds, fp, fn = _cp_one_direction(out, inn, delta, beta)
    i = int(np.argmax(eps - 1e-12 * (fp / n0 + fn / n1)))
    return float(eps[i]), float(thresholds[i]), int(fp[i]), int(fn[i])


def cp_both_tails(out: np.ndarray, inn: np.ndarray, delta: float, beta: float, seed: int = 0
                  ) -> tuple[float, float, int, int, str]:
    """:func:`cp_grid` on both orders of the score (ties broken at random, :func:`_tie_broken`),
    paid for: "higher means IN" at (1 − r)·β and "lower means IN" (the scores negated) at r·β,
    r = :data:`REVERSED_SHARE` (Bonferroni over the two). Returns (ε lower bound, threshold, FP,
    FN, direction); the threshold is a score: IN iff s ≥ t, or s ≤ t where reversed."""
    found = []
    for sign, share, direction in ((1.0, 1 - REVERSED_SHARE, HIGHER), (-1.0, REVERSED_SHARE, REVERSED)):
        key_out, key_in, boundary = _tie_broken(sign * out, sign * inn, seed)
        lb, t, fp, fn = cp_grid(key_out, key_in, delta, share * beta)
        found.append((lb, sign * boundary(t), fp, fn, direction))
    return found[1] if found[1][0] > found[0][0] else found[0]


#: the two orders of a score: the attack's own, and the reversed one
HIGHER, REVERSED = "higher means IN", "lower means IN"


def _tie_broken(out: np.ndarray, inn: np.ndarray, seed: int
                ) -> tuple[np.ndarray, np.ndarray, Callable[[float], float]]:
    """The scores as keys with no ties, and a map from a key threshold back to a score.

    Where scores tie (a discrete score: randomised response, a bug that releases the truth), each
    trial gets a uniform U_i of a generator of its own (seeded by `seed`, independent of the
    scores and of the worlds), and the scores are ordered by (s_i, U_i): a randomised test that
    says IN on a tied score with a probability, which DP bounds like any other test (TPR ≤ e^ε FPR
    + δ holds for every randomised decision rule). The pairs stay iid within each world, so
    :func:`cp_grid`'s argument holds, and its count grid now meets every false-positive count
    exactly: with ties, a grid count between two achievable counts paid for the larger one (on
    randomised response at ε = 1, 1,000 trials: 0.56 instead of 0.86). The keys are the ranks of
    (s, U) in both worlds together. Without ties the scores are returned unchanged (every bound as
    before)."""
    scores = np.concatenate([out, inn])
    if np.unique(scores).size == scores.size:
        return out, inn, lambda t: t
    u = np.random.default_rng([int(seed), 0x71E5]).random(scores.size)
    order = np.lexsort((u, scores))
    keys = np.empty(scores.size)
    keys[order] = np.arange(scores.size, dtype=float)
    ranked = scores[order]

    def boundary(t: float) -> float:  # the score at the key threshold (a tie there is split at random)
        return float(ranked[min(int(np.ceil(t)), ranked.size - 1)]) if np.isfinite(t) else t

    return keys[:out.size], keys[out.size:], boundary


@dataclass(frozen=True)
class RankThreshold:
    """One threshold at an OUT false-positive count fixed a priori: k of the n_out OUT scores lie above it (ties
    broken at random), "s ≥ threshold says IN"; fp and fn are the realised error counts there."""

    n_out: int
    n_in: int
    k: int
    threshold: float
    fp: int
    fn: int


def at_rank(out: np.ndarray, inn: np.ndarray, fraction: float, seed: int = 0) -> RankThreshold:
    """The threshold leaving k = ⌊fraction · n_out⌋ OUT scores above it, in the attack's own order, ties broken
    at random as in :func:`cp_both_tails` (`seed`). Its FPR lies below V ~ Beta(k + 1, n_out − k)
    (:func:`mix_nodes` with the count k): the one-count test of :func:`cp_at_rank` and of
    :func:`audit.stats.estimators.node_fit.fit_at_share`. `fraction` must not depend on these scores."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"the a-priori false-positive fraction must be in [0, 1), got {fraction!r}")
    key_out, key_in, boundary = _tie_broken(out, inn, seed)
    n0, n1 = key_out.size, key_in.size
    k = min(int(math.floor(fraction * n0)), n0 - 1)
    threshold = np.nextafter(np.sort(key_out)[n0 - 1 - k], np.inf)
    fp, fn = (int(c[0]) for c in _rates_at(key_out, key_in, np.array([threshold])))
    return RankThreshold(int(n0), int(n1), k, boundary(threshold), fp, fn)


def cp_at_rank(out: np.ndarray, inn: np.ndarray, delta: float, beta: float, fraction: float, seed: int = 0
               ) -> tuple[float, float, int, int]:
    """:func:`cp_grid`'s test at one count fixed before any score is seen (:func:`at_rank`): k = ⌊fraction · n_out⌋
    OUT false positives, the attack's own order ("s ≥ t says IN"), the whole β on that one test (no grid, no
    reversed order to pay for). Returns (ε lower bound, threshold as a score, FP, FN). Valid for any `fraction`
    that does not depend on these scores (cp_grid's argument with |K| = 1); a fraction picked on them is not
    (tests/test_cp_at_rank.py)."""
    r = at_rank(out, inn, fraction, seed)
    eps = float(mix_eps(np.array([r.n_in - r.fn]), np.array([r.k]), r.n_out, r.n_in, delta, beta)[0])
    return eps, r.threshold, r.fp, r.fn


def cp_grid_max(n_out: int, n_in: int, delta: float, beta: float) -> float:
    """`cp_grid`'s bound for a perfect attack (no errors) with these trial counts."""
    ks = cp_counts(n_out)
    level = (1 - REVERSED_SHARE) * beta / ks.size  # the attack's own order's share (cp_both_tails)
    return float(np.max(mix_eps(np.full(ks.size, n_in), ks, n_out, n_in, delta, level)))
