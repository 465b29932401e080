"""DPDGC: differentially private decoupled graph convolutions (Chien et al., NeurIPS 2023).

Paper: Chien, Chen, Pan, Li, Özgür, Milenkovic, *Differentially Private Decoupled Graph
Convolutions for Multigranular Topology Protection* (arXiv 2307.06422); spec
``shared/specs/dpdgc.md``.

Pipeline (spec §2.1, §4.2):

1. (node GDP only) bound every column sum of A by ``max_degree`` = D (a per-column random subset,
   the choice fixed by a hash of (seed, row, column) so that the same edge gets the same fate in
   both worlds).
2. **DP-Emb**: train ``W ∈ R^{n×h}``, ``b ∈ R^h`` of ``logits_i = SELU(A_i W + b) R`` (R a fixed,
   untrained random orthogonal head) with DP-Adam: fixed-size batches of B labelled nodes drawn
   uniformly without replacement, per-example clipping to ``clip``, Gaussian noise of std
   ``2σ·f(g)·clip`` on the sum (replace-one adjacency, group size g), then every row of W is
   projected back to norm ``norm_scale`` = c.
3. **Embedding**: ``Z = A W + 1 bᵀ + N(0, s²)`` with ``s = σ·Δ_Z`` (computed in float64), cached.
4. **Classifier**: LINKX-style over (X_i, Z_i), Z row-normalised first (``normalize_z``, Alg. 2;
   post-processing): plain Adam with dropout/BatchNorm under edge GDP,
   DP-Adam (group size 1, noise ``2σ·clip``) under k-neighbour and node GDP.
5. **Inference**: ``softmax(classifier(X_v, Z_v))`` from the cached Z; no fresh noise per query.

Adjacency levels (``unit``, ``k``) and what each protects:

* ``unit="edge"``: one **directed** entry A[r, j] (Thm G.1): Δ_Z = c, g = 1. ``undirected_edge``
  protects both directions instead (Δ_Z = √2·c, g = 2; not in the paper, spec §9.5).
* ``unit="node", k=K``: k-neighbour GDP N_K (Thm 5.4): X_r, Y_r and up to K entries of row r and of
  column r; Δ_Z = c√K, g = K + 1; no degree bound. K = 0 releases Z without noise.
* ``unit="node", k=None``: node GDP (Thm 5.3) on the degree-bounded graph: Δ_Z = c√(2D),
  g = 2D + 1 (``node_group="sound"``, spec §9.4) or D + 1 (``"paper"``).

Accountant (spec §3.3–3.5; the reference code's autodp set-up, which the paper's Lemma F.1 turns
into (ε, δ)): one noise multiplier σ shared by every component,
``RDP(α) = RDP_wor(α; q=B/m, σ, T_enc) + [α/(2σ²) if Z is noisy] + [RDP_wor(α; q, σ, T_clf) under
node/N_k]`` with ``RDP_wor`` the sampled-without-replacement Gaussian bound of Wang, Balle &
Kasiviswanathan 2019 (Thm 27, replace-one), ``T = ⌊epochs·m/B⌋`` per module, and
``ε = min_α RDP(α) + log(1/(αδ))/(α−1) + log(1 − 1/α)`` (Lemma F.1). δ (paper rule, code values):
``10^-digits(#directed edges)`` under edge GDP, ``10^-digits(m)`` otherwise. The group size g does
not enter the accountant: it only scales the DP-Emb noise, linearly by default (``group_scaling``).

Releases (shapes: n nodes, F features, C classes, h = ``hidden``):

* ``api``: ``predict(graph, nodes) -> n_query × C`` posteriors (X from ``graph``, Z cached).
* ``weights``: ``emb.W`` (n×h), ``emb.b`` (h), ``emb.R`` (h×C) and the classifier's parameters.
* ``mechanism``: one step, Z (n×h, float64): ``mean(graph) = A(graph)·W + b`` with the released W, b
  held fixed, ``noise_std = s``. Under node GDP the degree bound's hash seed is not released: the
  mean uses a fixed public seed and ``noise_std`` is None (a projection statistic, not an exact LLR).
* ``trace`` (k-neighbour and node GDP only, where DP-Emb's DP-SGD carries the node-level claim): a
  :class:`targets.common.trace.DPSGDTrace`, one ``TraceStep`` per DP-Adam step of DP-Emb:
  ``noisy`` = the released noisy *sum* [grad_W (n×h, row-major) | grad_b (h)] before the division
  by B, ``central`` = the batch, ``clean`` = the noiseless clipped sum including any canary and
  ``canary_in`` (auditor instrumentation). Built on first use by replaying DP-Emb from the
  generator state it started from (checked to give back the released W), so fits that never read
  it hold no T×d floats and draw exactly what they drew before.

Gradient canary: ``graph.canary_gradient`` (``canaries.gradient.DiracGradient``; length
``dimension(graph)`` = n·h + h, or T×d) is added, unclipped, to every step's clipped sum. Only with
full-batch DP-Emb (``batch_size`` ≥ m, q = 1): fixed-size batches give a virtual example no
inclusion coin of its own. At q = 1 the wor accountant is the plain Gaussian's (``T·α/(2σ²)``,
replace-one sensitivity 2·C against noise 2σ·C per unit of group). The claim names the trace's law
for the canary: ``trace_noise_std`` (the claimed DP-Emb std 2σ·f(g)·C) and ``canary_norm`` = g·C.

Planted bugs: ``no-noise``; ``norm-noop`` (the reference code's weight-row normalisation that never
takes effect: rows keep their trained norms while the noise is still scaled by c, spec §8.1);
``sqrt-group-noise`` (DP-Emb noise ``2σ√g`` while the claim assumes linear group scaling, §8.2).

Cost: the paper's 100 + 100 epochs give T = ⌊100·m/B⌋ steps per module; on the csbm default
(m = 180, B = 64) that is 281 + 281 cheap steps; on Cora with the paper's 75 % split (m = 2031)
3173 + 3173 steps. The classifier is trained only when a view needs it (``api``, its weights in
``weights``, ``info["accuracy"]``; :class:`targets.base.Lazy`, from a generator split off at fit
time), so a mechanism audit pays DP-Emb and Z only. ``fit_batch`` runs DP-Emb for K trials at once
(:mod:`targets.dpdgc.dpemb`: parameters stacked K × (n + 1) × h, batch rows summed from A's CSR
by ``embedding_bag``, the noise drawn straight into the gradient buffer, one fused Adam over the
per-run blocks), split into one group per usable core (of ≥ 4 runs), each on its own thread; run j is
bitwise the lone ``fit`` whatever K or the grouping. Its floor is DP-Emb's own noise: T·(n·h + h)
normal draws per trial (10.8 M on csbm); ``benchmarks/throughput.md`` has the measured ratio.
"""
from __future__ import annotations

from targets.dpdgc.accountant import CALIBRATION, ORDERS, calibrated_sigma, dpdgc_rdp, lemma_f1_epsilon, wor_gaussian_rdp
from targets.dpdgc.config import DPDGCConfig
from targets.dpdgc.model import bound_column_degree
from targets.dpdgc.target import DPDGC, PAPER_SPLIT_SEED

__all__ = ["CALIBRATION", "DPDGC", "DPDGCConfig", "ORDERS", "PAPER_SPLIT_SEED", "bound_column_degree",
           "calibrated_sigma", "dpdgc_rdp", "lemma_f1_epsilon", "wor_gaussian_rdp"]
