"""``shuffle-lrt`` and its crafted graph (issue #45: the shuffled-batches bug on Chua et al.'s pair).

The graph (graphs.small.opposed_rows) makes every clipped gradient of dpsgd-gcn's linear model exactly ±C·u;
the score, on simulated exact traces, separates shuffled worlds, reads nothing but the released sums, needs
world 0's own batch sizes for its power, and at its a-priori threshold 0 certifies nothing above the
Poisson claim on Poisson traces.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.stats import beta, mannwhitneyu

from attacks.shuffle_lrt import ShuffleLRT, canary_direction, shuffled_counts
from canaries.node import RemoveNode
from graphs.small import opposed_rows
from targets.base import build
from targets.dpsgd_gcn import dpsgd_epsilon

Q, T, SIGMA = 0.1, 10, 0.9377  # σ: dpsgd-gcn's ε = 2 calibration at q = 0.1, T = 10 on 180 rows


def _u(graph):
    rows = graph.train_mask.nonzero().view(-1)
    return canary_direction(graph.x, graph.y, 0, rows)


def test_opposed_rows_gradients_are_exactly_plus_minus_c_u():
    g = opposed_rows()
    u, rho = _u(g)
    f = g.x.size(1)
    w = torch.cat([g.x[0], -g.x[0], torch.tensor([1.0, -1.0])]).double()
    assert torch.allclose(u, w / w.norm()) and rho == pytest.approx(-1.0)
    t = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=SIGMA, sampling_rate=Q, steps=T, hidden=0, lr=1e-4,
              bug="shuffled-batches")
    assert t.dimension(g) == 2 * f + 2
    for seed in range(4):  # every step: the init and the nine after it
        for st in t.fit(g, torch.Generator().manual_seed(seed)).trace:
            ones = int((st.central == 0).sum())
            expect = (ones - (st.central.numel() - ones)) * u.float()  # C = 1: canary +u, the others −u
            assert torch.allclose(st.clean, expect, atol=1e-5)
            assert st.central.numel() == 18  # 180 rows ≡ 0 (mod 10): every batch full


def test_opposed_rows_by_name_and_bad_sizes():
    from graphs.datasets import load

    g = load("opposed-rows:n_train=20,features=8,scale=0.25")
    assert int(g.train_mask.sum()) == 20 and g.x.shape == (21, 8) and g.y.tolist() == [1] + [0] * 20
    assert torch.equal(g.x, torch.full((21, 8), 0.25))
    with pytest.raises(ValueError, match="n_train >= 2"):
        opposed_rows(n_train=1)


def test_remove_node_takes_the_opposed_row_as_a_shuffled_row():
    g = opposed_rows(n_train=20, features=4)
    pair = RemoveNode().worlds(g, np.random.default_rng(0))
    assert pair.node == 0 and int(pair.g0.train_mask.sum()) == 19 and int(pair.g1.train_mask.sum()) == 20
    t = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=SIGMA, sampling_rate=Q, steps=T, hidden=0, lr=1e-4,
              bug="shuffled-batches")
    with_z = t.fit(pair.g1, torch.Generator().manual_seed(1)).trace
    without = t.fit(pair.g0, torch.Generator().manual_seed(1)).trace
    assert sum(int((st.central == 0).sum()) for st in with_z) == 1  # the canary row in exactly one step
    assert [st.central.numel() for st in with_z] == [2] * 10
    assert [st.central.numel() for st in without] == [2] * 9 + [1]  # world 0: the last batch short


def test_shuffled_counts():
    assert shuffled_counts(20, 10).tolist() == [2.0] * 10
    assert shuffled_counts(19, 10).tolist() == [2.0] * 9 + [1.0]
    assert shuffled_counts(3, 5).tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_epoch_llr_is_the_mixture_log_ratio_also_on_a_short_epoch():
    from scipy.stats import norm

    from attacks.shuffle_lrt import epoch_llr

    o, m0, m1, bump, sd, L = np.array([-1.3, 0.4, -0.2]), np.array([-1.0, -1.0, 0.0]), np.full(3, -1.0), 2.0, 0.8, 3
    for seen in (3, 2):  # a whole epoch, and one whose last step was not released
        p0 = norm.pdf(o[:seen], m0[:seen], sd).prod()
        p1 = np.mean([norm.pdf(o[:seen], m1[:seen] + bump * (np.arange(seen) == k), sd).prod() for k in range(L)])
        assert epoch_llr(o[:seen], m0[:seen], m1[:seen], bump, sd, L) == pytest.approx(math.log(p1 / p0), rel=1e-9)


# ------------------------------------------------------------------ simulated exact traces
class _Released:
    """A trace step that holds only the released sum: reading anything else raises."""

    def __init__(self, noisy):
        self.noisy = noisy

    def __getattr__(self, name):
        raise AssertionError(f"shuffle-lrt read the step's {name!r}, which is not released")


def _pair_and_u(n_train=20):
    g = opposed_rows(n_train=n_train, features=4)
    pair = RemoveNode().worlds(g, np.random.default_rng(0))
    return pair, _u(g)[0].float()


def _trace(means, u, rng):
    """A trace whose step sums are means_t·C·u (C = 1) plus N(0, σ² I)."""
    steps = [_Released(float(m) * u + SIGMA * torch.as_tensor(rng.standard_normal(u.numel()), dtype=torch.float32))
             for m in means]
    f = (u.numel() - 2) // 2
    return SimpleNamespace(trace=SimpleNamespace(steps=steps, noise_std=SIGMA, clip_norm=1.0, sampling_rate=Q,
                                                 shapes={"body.weight": (2, f), "body.bias": (2,)}))


def _shuffled_means(m, world, rng, epochs=1):
    """Per-step sums along u of a shuffled epoch (rows at −1, the canary at +1; cut by % L)."""
    L = round(1 / Q)
    out = []
    for _ in range(epochs):
        sums = -shuffled_counts(m if world else m - 1, L)
        if world:
            sums[rng.integers(L)] += 2.0
        out.extend(sums)
    return out


def _poisson_means(m, world, rng):
    out = []
    for _ in range(T):
        rest = -float((rng.random(m - 1) < Q).sum())
        out.append(rest + (1.0 if world and rng.random() < Q else 0.0))
    return out


def _scores(attack, pair, u, means_of, n, seed):
    rng = np.random.default_rng(seed)
    m = int(pair.g1.train_mask.sum())
    return [np.array([attack.score(_trace(means_of(m, b, rng), u, rng), pair) for _ in range(n)]) for b in (0, 1)]


def _auc(out, inn):
    return float(mannwhitneyu(inn, out, alternative="greater").statistic) / (len(out) * len(inn))


def test_score_separates_exact_shuffled_traces_and_reads_only_the_released_sums():
    pair, u = _pair_and_u()
    out, inn = _scores(ShuffleLRT(), pair, u, _shuffled_means, 300, seed=1)
    assert np.isfinite(out).all() and np.isfinite(inn).all()
    assert _auc(out, inn) > 0.75  # optimal test of a pair whose ε is ≈ 6.3 (benchmarks/shuffle_vs_poisson.md)
    assert np.median(inn) > 0 > np.median(out)


class _SameBatchesInBothWorlds(ShuffleLRT):
    """Mutant: world 0's batch sizes taken as world 1's (the short last batch forgotten)."""

    def model(self, trace, pair):
        u, sd, _, mean1, bump = super().model(trace, pair)
        return u, sd, mean1, mean1, bump


def test_wrong_world0_batch_sizes_lose_power():
    pair, u = _pair_and_u()
    honest = _auc(*_scores(ShuffleLRT(), pair, u, _shuffled_means, 300, seed=2))
    mutant = _auc(*_scores(_SameBatchesInBothWorlds(), pair, u, _shuffled_means, 300, seed=2))
    assert honest - mutant > 0.05, (honest, mutant)


def test_threshold_zero_certifies_nothing_above_the_poisson_claim_on_poisson_traces():
    """On the correct sampler's exact traces, the fixed threshold 0's Clopper–Pearson ε (95 %) stays below
    the Poisson claim of that σ (the claim is a valid upper bound on these traces' ε)."""
    pair, u = _pair_and_u(n_train=180)
    n = 1500
    out, inn = _scores(ShuffleLRT(), pair, u, _poisson_means, n, seed=3)
    delta = 1 / 180 ** 1.1
    claim = dpsgd_epsilon(SIGMA, sampling_rate=Q, steps=T, delta=delta)[0]
    for pos, neg in ((inn, out), (-out, -inn)):  # either direction of the test at threshold 0
        tp, fp = int((pos > 0).sum()), int((neg > 0).sum())
        tpr_lo = float(beta.ppf(0.025, tp, n - tp + 1)) if tp else 0.0
        fpr_hi = float(beta.ppf(0.975, fp + 1, n - fp))
        eps = math.log(max(tpr_lo - delta, 1e-300) / fpr_hi)
        assert eps < claim, (eps, claim)


def test_the_portfolio_pilots_it_with_row_canaries_on_shuffled_batches_only(csbm):
    from audit.plan.portfolio_candidates import candidates

    g = opposed_rows(n_train=20, features=4)
    for graph, bug, hidden, expect in ((g, "shuffled-batches", 0, True), (g, None, 0, False),
                                       (csbm, "shuffled-batches", 16, False)):
        t = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=SIGMA, sampling_rate=Q, steps=T, hidden=hidden, lr=1e-4,
                  bug=bug)
        found, skipped = candidates(t, graph)
        ours = [c for c in found if c.attack == "shuffle-lrt"]
        if expect:  # pointed by the probe's batch sizes, on the node-removal canaries only
            assert {c.canary for c in ours} == {"remove-node", "isolating-node"}
            assert all("fixed-size or shuffled batches" in c.pointed_by for c in ours)
        else:
            assert not ours and any(s["attack"] == "shuffle-lrt" for s in skipped)
