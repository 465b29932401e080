"""HeterPoisson: node-level DP-SGD for GNNs (Xiang, Wang & Wang, IEEE S&P 2024).

Paper: "Preserving Node-level Privacy in Graph Neural Networks" (papers/heterpoisson.txt,
spec specs/heterpoisson.md).

Mechanism (one training step, Algorithm 1 with the Heter-Poisson sampler of Algorithms 2-3)
-------------------------------------------------------------------------------------------
1. Central nodes: every training node is drawn independently with probability ``q_b``
   (``sampling_rate``).
2. Neighbour sampling: every central node ``i`` keeps each in-neighbour ``j`` (an edge
   ``j → i``) independently with probability ``min(1, M / outdeg_G(j))`` (``M`` = ``neighbors``).
   Out-degrees are taken in the whole public graph ``G`` (``graph.public_outdeg`` when the graph
   carries it, else the given ``edge_index``). Peripheral candidates are all in-neighbours
   (training nodes and the non-sensitive non-training nodes, as in the authors' code).
3. Overlap removal: a peripheral copy of *any* central node of the batch is dropped (NULL =
   absent), whatever the order of the batch, so no node is ever central and peripheral at once.
   An isolated central node gets a single-node sub-graph.
4. Each star sub-graph ``{i} ∪ N_i`` is one example: its loss is the central node's cross
   entropy; per-sub-graph gradients (torch.func) are clipped to ``clip_norm`` (0.5) in ℓ2 over
   all parameters and summed.
5. Noise on the sum: SML ``√W · s · N(0, I_d)`` with ONE ``W ~ Exp(1)`` per step for the whole
   d-dimensional gradient (``noise="sml"``), or Gaussian ``s · N(0, I_d)`` (``noise="gaussian"``);
   ``s = noise_multiplier · 2·clip_norm`` (the paper's σ is in units of 2c = 1). The noisy sum is
   divided by the *expected* batch size ``q_b · n_train`` and fed to Adam (lr 0.01, [code]).
6. Exactly the accounted ``T`` steps are run (``steps``, or ``ceil(epochs / q_b)``).

Model: K = 1 message-passing layer (only 1-hop stars exist), backbones ``gcn`` (symmetric
normalisation with degrees inside the undirected star), ``sage`` (mean over N_i ∪ {i}), ``gin``
(Σ N_i + (1+λ) x_i, λ learnable); then Linear(f, hidden) → ELU → Linear(hidden, C).
Inference (``api``): each query node samples up to ``test_neighbors`` (13) in-neighbours uniformly
among *non-training* nodes (the paper's inference privacy), with a sampling seed fixed at fit
time (so a query is deterministic; the randomness is not privacy noise).

Unit and accountant
-------------------
Node-level, add/remove one training node with its features, label and all incident (directed)
edges, degrees fixed by the public graph (the paper's S2). The accountant is Theorem 2: per-step
RDP ``r(α) = ln E_{k~ρ} B_k(α) / (α−1)`` with ``ρ = q_b·δ_{0.5} + (1−q_b)·Poisson(q_b M)`` (the
D→∞ worst case of the binomial mixture; closed form, no truncation), ``B_k`` the 1-D Laplace
Rényi moment with scale ``σ/√2`` -- exact (``accountant="exact"``, [code], default) or with the
paper's looser ``+1/2`` second term (``accountant="paper"``); T-fold composition and the
Balle et al. 2020 conversion over α ∈ linspace(1.0001, 10, 100) ∪ {11..256}. ``noise="gaussian"``
replaces ``ln B_k`` by ``α(α−1)k²/(2σ²)`` with ``k ~ Bin(D, q_b·min(1, M/D))`` at the largest
out-degree D (``max_degree``, default |V|−1: the theorem's range). ``remove_overlap=False`` (the
Fig. 6 ablation) uses ``ρ(k+½) = q_b·Pois(k)``. δ defaults to ``n_train^{-1.1}``; ``q_b``
defaults to ``min(1, batch_size / n_train)`` with the paper's expected batch 4096 (so q_b = 1 on
the small harness graphs: pass ``sampling_rate`` for amplification). ``noise_multiplier`` set in
the config overrides calibration (the claim then says which ε that σ gets).

Release views
-------------
* ``trace``: a :class:`DPSGDTrace`, one :class:`TraceStep` per step run, with
  ``noisy`` (the released noisy summed gradient, flat float32 vector of length d, parameters in
  ``model.parameters()`` order, see ``trace.shapes``), ``central`` (the batch's central node ids),
  ``canary_in`` (whether the canary gradient was added; None without canary) and ``clean`` (the
  noiseless clipped sum including the canary: *instrumentation* for white-box auditors who know the
  rest of the batch, not part of the paper's release) and ``canary_scale`` (the whole-node canary's
  multiplier of g_c at that step, see below; None otherwise). ``trace.noisy_matrix()`` stacks them (T×d).
* ``weights``: the val-selected checkpoint; ``api``: ``predict(graph, nodes=None)`` → softmax.
  A checkpoint is kept every ``eval_every`` steps; the one of best validation accuracy (the api's
  predictions with it; ties: the later) is picked when ``weights``, ``api`` or
  ``info["accuracy"]`` (a :class:`targets.base.Lazy`) is first read, so trace-level audits never
  pay for validation. Nothing random is drawn then: the release is the same whether or not it is read.

Gradient-canary hook
--------------------
``fit(graph, rng, canary_gradient=g_c, canary_node=z)`` (or the graph attributes
``graph.canary_gradient`` / ``graph.canary_node``) adds ``g_c`` -- a length-d vector, or a T×d
matrix with one row per step run, already at the intended norm (it is NOT clipped) -- to the
clipped sum at every step where the canary is sampled. With ``canary_node = z`` (a training node)
the canary is included exactly when z is drawn central (z's own sub-graph gradient still counts);
without it, the canary is a virtual extra example with its own Poisson(q_b) coin drawn from a
generator split off ``rng`` at the start of fit, so two worlds that differ only by the canary see
identical batches and identical noise. ``HeterPoisson.dimension(graph)`` gives d.

Whole-node canary: with ``canary_whole_node=True`` (or ``graph.canary_whole_node``) the canary stands
for everything node z can do to a step: its own star when z is central (norm c) and every other
star in which z survives overlap removal as a peripheral (2c each, a star with vs without z). The
step adds ``scale_t · g_c`` with ``scale_t = 1[z central] + 2·m_t``, m_t the number of those other
stars, read off the sampled batch (no random draw, so both worlds see the same m_t; z and its edges
are in the graph in both). Each step records ``canary_scale = scale_t`` in *both* worlds (world 0
sets ``canary_node`` and the flag without a gradient): auditor instrumentation like ``clean``.
The correct sampler at ``sampling_rate = 1`` gives scale_t = 1 at every step (z is central and
never a peripheral): exactly the ``δ_{1/2}`` the accountant charges. ``order-overlap`` raises it at
q_b = 1 (z survives in the stars of out-neighbours that come earlier in the shuffled batch);
``isolated-fallback`` only where z is not central (q_b < 1): overlap removal drops a central z's
fallback copies.

Suspected flaw in the paper (auditable with the ``trace`` view) [ours]
---------------------------------------------------------------------
Lemma 1 (a spherical noise's d-dimensional Rényi divergence equals the 1-D one) holds for the
Gaussian but not for SML when d ≥ 3: the released vector's norm (||noise||² = W·s²·χ²_d, with
χ²_d/d → 1) reveals W, and given W the step is a Gaussian mechanism with std s·√W, whose privacy
loss is unbounded as W → 0 (the d-dimensional SML density is unbounded at its centre; D_α = ∞ for
α > d/(d−2)). In the W-revealed limit the default csbm run (q_b = 1, T = 9, σ = 1.41 for ε = 4)
has δ(4) ≈ 0.21 against the claimed 3.3e-3, and on the paper's Facebook setting a single step
already has δ(2) ≥ 6e-5 > 1.63e-5. A full-vector auditor that estimates W from the norm of the
released (minus known) gradient and applies the conditional Gaussian likelihood ratio should
exceed the claim.

Shapes: x is n×f; d = f·h + h + h·C + C (+1 for GIN's λ, first in the flat vector).

Batched fits: ``fit`` is ``fit_batch([rng])[0]``; ``fit_batch`` trains runs in stacks with
closed-form per-example gradients (:mod:`targets.heterpoisson.stacked`), run k drawing only from
its own generator, so a run's release is bitwise the same in any stack (CPU). Cost (CPU, one
core, shared machine; benchmarks/throughput.md): csbm default (q_b = 1, T = 9, d = 4,612) ≈ 4-6 ms
a run in a stack, ≈ 9-12 ms alone; Cora ≈ 80 ms a run.
"""
from __future__ import annotations

from targets.heterpoisson.accountant import (
    ORDERS,
    _log_poisson_laplace_moment,
    gaussian_log_moment,
    heterpoisson_epsilon,
    sml_log_moment,
    sml_sample,
)
from targets.heterpoisson.config import ACCOUNTANTS, BACKBONES, NOISES, HeterPoissonConfig
from targets.heterpoisson.model import Batch, StarNet
from targets.heterpoisson.target import HeterPoisson
from targets.common.trace import DPSGDTrace, TraceStep

__all__ = ["ACCOUNTANTS", "BACKBONES", "Batch", "HeterPoisson", "HeterPoissonConfig", "DPSGDTrace", "NOISES",
           "ORDERS", "StarNet", "TraceStep", "gaussian_log_moment", "heterpoisson_epsilon", "sml_log_moment",
           "sml_sample"]
