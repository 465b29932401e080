"""Node LiRA and RMIA: per-canary likelihood ratios from shadow models (black box, ``api`` view).

Specs: ``shared/specs/gmia.md`` §4 (LiRA, Carlini et al. 2022), §5 (RMIA, Zarifzadeh et al. 2024),
§7 (from an MIA to an audit). Membership here is the node-DP neighbour relation M3 of §1: in world 1
the canary node z is a training node with its edges; in world 0 it is isolated and in no mask
(``canaries/node.py``), so what is audited is exactly the node-level claim.

Shadow models. The auditor knows both worlds. Shadow model i is the target under audit (same class,
same config, pinned public parameters) fitted on ``pair.world(b_i)``:

* offline (default): every b_i = 0 (the canary is OUT of every shadow, as in the paper's offline
  attack: the shadows could have been trained before the target);
* online: the b_i are a random balanced assignment (half IN, half OUT; a permutation drawn from the
  attack's own seed).

``keep < 1`` additionally drops each other training node from the shadow's training mask with
probability 1 − keep (a resampled population, as in Carlini et al.'s random halves); the default
1.0 keeps the auditor's exact knowledge of the graph. Shadow randomness comes from
``SeedSequence([seed, fingerprint of the pair, i])``: it depends on the attack's seed and the
graph's content, never on a scored trial. Shadows are trained once, on the first ``score``, and
cached (on the instance and in a small process-wide cache keyed by the same content, so the game's
per-chunk attack instances share them).

Query protocol (identical for the target, every shadow, IN and OUT): ``query="auto"`` reads the
released predictions on the training graph (``api(None, nodes)``); if the API needs a graph, it is
queried with ``pair.g1`` (the world with the canary's edges, the same graph whatever the bit).
``query="g1"`` / ``"g0"`` force a query graph. One API call per score.

Scores (higher = canary IN):

* LiRA signal φ = log p_y − log Σ_{y'≠y} p_{y'} (logit-scaled confidence of the canary's true label,
  computed from the posteriors with the other classes summed directly, clipped at 1e-45).
* ``online``: Λ = log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²). ``fixed_variance=True`` (default)
  pools one σ over the IN and OUT residuals, as the spec recommends below ~64 shadows (with 4 IN
  shadows a per-world σ_in is often far too small). Λ is then linear in φ, i.e. a one-sided test in
  the direction the shadows show (μ_in vs μ_out); with few shadows and a wide OUT distribution that
  direction can come out wrong (see the report of issue 10 for measured cases).
* offline, ``offline_score="logpdf"`` (default; the reference code's two-sided score):
  −log N(φ; μ_out, σ_out²). ``offline_score="cdf"`` is the paper's one-sided test Φ((φ − μ_out)/σ_out);
  the score is the z-value (φ − μ_out)/σ_out itself, a monotone transform of Φ(z) that does not
  saturate at 1 for a non-private target (same ROC). The one-sided test assumes that inclusion
  *raises* the canary's confidence; for a remove-node canary on a GCN, inclusion also gives z its
  edges, which can lower its confidence (measured: AUC ≈ 0 on 3 of 4 csbm canaries), hence the
  two-sided default. A crafted insert-node canary's confidence can fall too on a GCN (its edges
  dilute its out-of-distribution features); where inclusion only adds the canary's own gradient
  (DP-SGD with ``hops = 0``) ``cdf`` is the stronger offline score.
* RMIA (``method="rmia"`` or :class:`RMIA`): Pr(x|θ) = p_y; Pr(x) = mean over shadows (online) or
  ½[(1 + a)·mean_OUT + (1 − a)] (offline, a = 0.3); ratio = Pr(x|θ_target)/Pr(x); the score is the
  fraction of population nodes z (non-training nodes of the graph, at most ``population``, drawn with
  the attack seed) with ratio_x / ratio_z > γ, where ratio_z uses the same target query and the same
  shadows. The z-normalisation cancels model-to-model shifts between trials.

Gaussian fits use the mean and the sample std (ddof 1 when ≥ 2 values) with a floor ``min_std``.

The shadow target. The attack must build the target under audit. In order: the ``shadow_target``
constructor argument; a target given to :meth:`LiRA.bind_target`; the target the release carries
(``Release.target``, a :class:`targets.base.Target`). Otherwise
``score`` raises and says so. (The game needs one line to provide it: see ``bind_target``.)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from attacks.base import Attack
from attacks.shadow import (ShadowModels, canary_node, count_query, logit_confidence, query_posteriors,
                            true_label_probability)
from targets.base import Level, Release, Target, Unit


def _gauss_logpdf(x: float, mu: float, sigma: float) -> float:
    return -0.5 * ((x - mu) / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2 * math.pi)


def _std(values: np.ndarray, floor: float) -> float:
    s = float(np.std(values, ddof=1)) if values.size >= 2 else 0.0
    return max(s, floor)


# ---------------------------------------------------------------------------------------------
# the attack
# ---------------------------------------------------------------------------------------------
class LiRA(Attack):
    """Node LiRA (offline by default) or RMIA on the canary node; see the module docstring.

    Args:
        shadows: number of shadow models (8).
        online: train IN and OUT shadows (balanced) and use the two-sided likelihood ratio.
        method: ``lira`` or ``rmia``.
        offline_score: ``logpdf`` (reference code, two-sided; default) or ``cdf`` (paper, one-sided).
        fixed_variance: online LiRA with one pooled σ (default True; False: σ_in and σ_out apart).
        rmia_a: offline RMIA's a (0.3). gamma: RMIA's γ (1.0). population: RMIA's |Z| (200).
        keep: probability of keeping each other training node in a shadow's training mask (1.0).
        query: ``auto``, ``g1`` or ``g0`` (see the module docstring).
        min_std: floor of the fitted σ (1e-3).
        seed: the attack's own seed (shadow training and RMIA's population).
        shadow_target: a target to build shadows with (default: the target under audit).
    """

    name = "lira"
    levels = (Level.API,)
    units = (Unit.NODE,)
    queries_per_score = 1

    def __init__(self, shadows: int = 8, online: bool = False, method: str = "lira", offline_score: str = "logpdf",
                 fixed_variance: bool = True, rmia_a: float = 0.3, gamma: float = 1.0, population: int = 200,
                 keep: float = 1.0, query: str = "auto", min_std: float = 1e-3, seed: int = 0,
                 shadow_target: Target | None = None) -> None:
        if method not in ("lira", "rmia"):
            raise ValueError(f"method must be 'lira' or 'rmia', got {method!r}")
        if offline_score not in ("cdf", "logpdf"):
            raise ValueError(f"offline_score must be 'cdf' or 'logpdf', got {offline_score!r}")
        if not isinstance(shadows, int) or shadows < (2 if online else 1):
            raise ValueError(f"shadows must be an int >= {2 if online else 1}, got {shadows!r}")
        if not 0 < keep <= 1:
            raise ValueError(f"keep must be in (0, 1], got {keep!r}")
        if not 0 <= rmia_a <= 1:
            raise ValueError(f"rmia_a must be in [0, 1], got {rmia_a!r}")
        if query not in ("auto", "g1", "g0"):
            raise ValueError(f"query must be 'auto', 'g1' or 'g0', got {query!r}")
        if population < 1:
            raise ValueError(f"population must be >= 1, got {population!r}")
        self.shadows, self.online, self.method = shadows, bool(online), method
        self.offline_score, self.fixed_variance = offline_score, bool(fixed_variance)
        self.rmia_a, self.gamma, self.population = float(rmia_a), float(gamma), int(population)
        self.keep, self.query, self.min_std, self.seed = float(keep), query, float(min_std), int(seed)
        self.shadow_target = shadow_target
        self._shadows = ShadowModels("lira")
        self.queries = 0
        self.last: dict[str, Any] = {}

    # -- wiring ------------------------------------------------------------------------------
    def bind_target(self, target: Target) -> None:
        """Give the attack the target under audit (the game's hook: ``attack.bind_target(target)``
        right after building the attack in ``play_chunk``)."""
        self._shadows.bound = target

    def _params(self) -> tuple:
        return (self.shadows, self.online, self.method, self.population, self.keep, self.query, self.seed)

    # -- shadows -------------------------------------------------------------------------------
    def population_nodes(self, pair: Any) -> np.ndarray:
        """RMIA's population Z: nodes in no training mask of either world (test nodes first), not z."""
        z = canary_node(pair)
        g1, g0 = pair.g1, pair.g0
        non_train = ~(g1.train_mask.cpu() | g0.train_mask.cpu())
        non_train[z] = False
        test = getattr(g1, "test_mask", None)
        pool = (non_train & test.cpu()) if test is not None and bool((non_train & test.cpu()).any()) else non_train
        idx = pool.nonzero().view(-1).numpy()
        if idx.size == 0:
            raise ValueError("RMIA needs population nodes outside every training mask; the graph has none")
        rng = np.random.default_rng([self.seed, 0x2B1A])
        if idx.size > self.population:
            idx = np.sort(rng.choice(idx, size=self.population, replace=False))
        return idx

    def shadow_stats(self, pair: Any, release: Release | None = None, graph: Any = None) -> dict[str, Any]:
        """Train (once) and return the shadow statistics: per shadow its bit, φ and p_y of the canary,
        and (RMIA) p_y of the population."""
        return self._shadows.trained(pair, release, self.shadow_target, self._params(),
                                     lambda target, base: self._train_shadows(target, pair, graph, base))

    def _train_shadows(self, target: Target, pair: Any, graph: Any, base: int) -> dict[str, Any]:
        z = canary_node(pair)
        label = int(pair.g1.y[z])
        plan = np.random.default_rng([self.seed, base, 0x5AD0])
        if self.online:
            bits = plan.permutation(np.arange(self.shadows) % 2)
        else:
            bits = np.zeros(self.shadows, dtype=int)
        pop = self.population_nodes(pair) if self.method == "rmia" else np.zeros(0, dtype=int)
        nodes = np.concatenate([[z], pop]).astype(np.int64)
        labels = pair.g1.y.cpu()[torch.as_tensor(nodes)]
        target.prepare(graph if graph is not None else pair.g1)
        phis, pys, pop_py = [], [], []
        for i, b in enumerate(bits):
            world = pair.world(int(b))
            if self.keep < 1.0:
                world = _resample(world, z, self.keep, np.random.default_rng([self.seed, base, i, 0x4EE9]))
            seed = int(np.random.SeedSequence([self.seed, base, i, 0x54AD]).generate_state(1, np.uint64)[0] >> 2)
            rel = target.fit(world, torch.Generator().manual_seed(seed))
            post = query_posteriors(rel.view(Level.API), self.query, pair.g1, pair.g0, nodes)
            phis.append(float(logit_confidence(post[:1], labels[:1])[0]))
            py = true_label_probability(post, labels)
            pys.append(float(py[0]))
            pop_py.append(py[1:])
        return {"bits": bits, "phi": np.array(phis), "py": np.array(pys),
                "pop_py": np.array(pop_py) if pop.size else np.zeros((len(bits), 0)),
                "population": pop, "label": label, "node": z}

    # -- scoring --------------------------------------------------------------------------------
    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        stats = self.shadow_stats(pair, release, graph)
        z = stats["node"]
        nodes = np.concatenate([[z], stats["population"]]).astype(np.int64)
        labels = pair.g1.y.cpu()[torch.as_tensor(nodes)]
        post = query_posteriors(release.view(Level.API), self.query, pair.g1, pair.g0, nodes)
        self.queries += 1
        count_query(release, 1)
        if self.method == "rmia":
            return self._rmia(stats, true_label_probability(post, labels))
        phi = float(logit_confidence(post[:1], labels[:1])[0])
        return self._lira(stats, phi)

    def _lira(self, stats: dict[str, Any], phi: float) -> float:
        bits, phis = stats["bits"], stats["phi"]
        out = phis[bits == 0]
        mu_out, sd_out = float(out.mean()), _std(out, self.min_std)
        if self.online:
            inn = phis[bits == 1]
            mu_in, sd_in = float(inn.mean()), _std(inn, self.min_std)
            if self.fixed_variance:
                resid = np.concatenate([inn - mu_in, out - mu_out])
                dof = max(resid.size - 2, 1)
                sd_in = sd_out = max(float(np.sqrt((resid ** 2).sum() / dof)), self.min_std)
            s = _gauss_logpdf(phi, mu_in, sd_in) - _gauss_logpdf(phi, mu_out, sd_out)
            self.last = {"phi": phi, "mu_in": mu_in, "sd_in": sd_in, "mu_out": mu_out, "sd_out": sd_out}
            return float(s)
        self.last = {"phi": phi, "mu_out": mu_out, "sd_out": sd_out}
        if self.offline_score == "cdf":
            return (phi - mu_out) / sd_out
        return -_gauss_logpdf(phi, mu_out, sd_out)

    def _rmia(self, stats: dict[str, Any], py_target: np.ndarray) -> float:
        bits = stats["bits"]
        ref_x = stats["py"]
        ref_z = stats["pop_py"]
        if self.online:
            pr_x, pr_z = ref_x.mean(), ref_z.mean(0)
        else:
            a = self.rmia_a
            pr_x = 0.5 * ((1 + a) * ref_x[bits == 0].mean() + (1 - a))
            pr_z = 0.5 * ((1 + a) * ref_z[bits == 0].mean(0) + (1 - a))
        tiny = 1e-300
        ratio_x = py_target[0] / max(pr_x, tiny)
        ratio_z = py_target[1:] / np.maximum(pr_z, tiny)
        frac = float(np.mean(ratio_x > self.gamma * ratio_z))
        self.last = {"ratio_x": float(ratio_x), "pr_x": float(pr_x), "fraction": frac}
        return frac


class OnlineLiRA(LiRA):
    """Online LiRA (balanced IN/OUT shadows, two-sided likelihood ratio): ``LiRA(online=True)``."""

    name = "lira-online"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("online", True)
        super().__init__(**kwargs)


class RMIA(LiRA):
    """RMIA on the canary node (offline by default): ``LiRA(method="rmia")``."""

    name = "rmia"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("method", "rmia")
        super().__init__(**kwargs)


# ---------------------------------------------------------------------------------------------
# resampled shadow worlds
# ---------------------------------------------------------------------------------------------
def _resample(world: Any, z: int, keep: float, rng: np.random.Generator) -> Any:
    """A copy of `world` where each training node other than z stays a training node w.p. `keep`."""
    out = world.clone()
    mask = world.train_mask.clone()
    idx = mask.nonzero().view(-1).numpy()
    idx = idx[idx != z]
    drop = idx[rng.random(idx.size) >= keep]
    mask[torch.as_tensor(drop, dtype=torch.long)] = False
    out.train_mask = mask
    return out

