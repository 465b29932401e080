"""GAP: differentially private GNNs with aggregation perturbation.

Sajadmanesh, Shamsabadi, Bellet & Gatica-Perez, USENIX Security 2023 (arXiv 2203.00949);
spec ``shared/specs/gap.md``. Three decoupled modules:

1. **Encoder** (EM): an MLP ``d → h`` trained on features and labels alone (no edges), then
   ``X0 = rownorm(encoder_mlp(X))`` for every node.
2. **Private multi-hop aggregation** (PMA), the only step that reads edges::

       H0 = rownorm(X0)
       S_k = Aᵀ H_{k-1} + N(0, (σΔ)² I)        (sum over in-neighbours: row v = Σ_{u→v} H_{k-1}[u])
       H_k = rownorm(S_k)                        k = 1..K

   computed once; the stack ``[H0, …, H_K]`` (N × h × (K+1)) is cached and every prediction reads it.
3. **Classifier** (CM): one base MLP per hop channel, combined (``cat`` by default), then a head.

Levels (``unit``):

* ``edge`` (EDP): encoder and classifier are trained without noise (they never see edges); only PMA
  is noisy, with sensitivity Δ = 1. **Unit: one directed edge u→v** — exactly what GAP's code
  charges (adding u→v changes only row v of ``Aᵀ H`` by a unit vector). ``edge_unit="undirected"``
  charges Δ = √2 instead (adding {u, v} changes rows u and v), same noise multiplier σ.
* ``node`` (NDP, add/remove a node with its features, label and incident edges): the out-degree is
  bounded to D = ``max_degree`` by sampling, PMA uses Δ = √D, and encoder and classifier are trained
  by DP-SGD (per-example clipping C, Gaussian noise σC on the summed clipped gradients, Poisson
  sampling at rate q = B / N_train, Adam on the noisy mean). No BatchNorm at node level.

Accountant (the paper's, literally): one noise multiplier σ shared by all modules, calibrated to
the target ε (GAP does not split the budget).

* EDP: PMA is K Gaussian mechanisms with noise multiplier σ, composed exactly (autodp
  ``ComposeGaussian``): it is μ-GDP with μ = √K / σ, converted to (ε, δ) by the exact GDP curve.
* NDP: RDP composition ε(α) = ε_EM(α) + K·α/(2σ²) + ε_CM(α), where each DP-SGD part is
  ``T = ⌊epochs · N_train / B⌋`` Poisson-subsampled Gaussian steps (rate q, via dp-accounting),
  converted with the improved RDP → (ε, δ) conversion (autodp's default).
* δ (``delta=None``): ``10^-digits(n)`` with n = number of *directed* edges (EDP; PyG counts both
  directions) or training nodes (NDP).

Releases (:class:`~targets.base.Release`):

* ``api``: ``predict(graph, nodes=None)`` → softmax posteriors (n_query × classes) read from the
  cached stack of the private graph (the transductive guarantee: no fresh noise; the ``graph``
  argument is accepted for the contract and ignored).
* ``weights``: ``encoder.*`` and ``classifier.*`` parameters.
* ``mechanism``: one :class:`~targets.base.MechanismStep` per hop with output ``S_k`` (N × h), the
  *pre-normalisation* noisy aggregate. GAP's proof is about exactly this Gaussian mechanism
  (``H_k = rownorm(S_k)`` is post-processing), so ``S_k = mean + N(0, (σΔ)²)`` entry-wise and
  ``noise_std = σΔ``; releasing ``S_k`` gives the adversary at least what the cached ``H_k`` gives,
  and the paper's composition bounds the joint law of ``(S_1, …, S_K)``, so an audit of it is sound.
  ``mean(graph) = A_graphᵀ H_{k-1}`` with the *released* ``H_{k-1} = rownorm(S_{k-1})`` held fixed
  (``H_0`` from the released encoder on ``graph.x``; rows a graph has beyond the release are filled
  with that graph's noiseless embeddings). At node level ``A_graph`` is degree-bounded with the
  run's own sampling seed (exact for the trained graph; the identity when no out-degree exceeds D).
* ``trace`` (node level only): a :class:`~targets.common.trace.DPSGDTrace` (Gaussian noise,
  std σC, clip norm C, Poisson rate q) of :class:`GAPTraceStep` s, one per DP-SGD step run: the
  released noisy sum of clipped per-example gradients (flattened in ``parameters()`` order), the
  sampled batch, ``clean`` (the noiseless clipped sum, canary included: auditor instrumentation),
  ``canary_in``, the module and its parameters before the step. ``trace_module`` picks the steps:
  ``all`` (both modules, two parameter spaces: no gradient canary) or ``encoder``/``classifier``
  (that module only, which a :class:`~canaries.gradient.DiracGradient` canary then joins).

Gradient-canary hook (node level, ``trace_module`` = ``encoder`` or ``classifier``): a graph with
``canary_gradient`` (a length-``dimension(graph)`` vector ``g_c``) adds ``g_c`` to that module's
clipped sum at every step where the canary's own Poisson(q) coin comes up, as a virtual extra
example. The coins come from a generator seeded by a hash of the fit generator's state (the fit
generator itself is not drawn from), and are drawn whether or not the canary is present: the two
worlds see the same batches, coins and noise, and every other view keeps its values.

Shapes: ``x`` N × d; stack N × h × (K+1); posteriors n × c; mechanism outputs N × h each.

Modules: :mod:`~targets.gap.config` (:class:`GAPConfig`), :mod:`~targets.gap.accountant` (EDP/NDP
accountants and the cached claim), :mod:`~targets.gap.model` (graph helpers, encoder, classifier),
:mod:`~targets.gap.recorder` (the node-level trace), :mod:`~targets.gap.stacked` (the batched
edge-level classifiers), :mod:`~targets.gap.target` (:class:`GAP`).

Batched trials (edge level): :meth:`GAP.fit_batch` plays B trials on one world, each generator
drawn from exactly as :meth:`GAP.fit` draws from it, and ``fit`` is the same code with B = 1. The
work the trials share is done once (Aᵀ as a cached sparse matrix, rownorm(X0) of the prepared
encoder and hop 1's aggregate Aᵀ·H0, the claim); per trial remain the noise draws and hops ≥ 2.
The classifiers are trained together on first use of any trial's classifier view, with parameters
stacked on a trial axis (:class:`ClassifierBatch`); every operation there is chosen so that a
trial's floats do not depend on the batch it is in (bitwise equal to ``fit``; tests check it).
Hop 1's mechanism step carries a ``mean_key``: its mean depends on the cached encoder and the
graph only, so a batched scorer computes it once. Hops ≥ 2 (whose means read the released H_k)
carry ``support``/``mean_rows``: the worlds' means differ only in the rows whose in-edges differ,
and the scorer computes those rows alone (A's rows sliced once per pair; bitwise the rows of the
whole product).

:meth:`GAP.prepare` caches the encoder under EDP only: it is trained on features, labels and masks
(never edges), which an edge canary does not change; the cache is keyed on those tensors, and kept
per process (a later chunk, or the canary search before it, reuses it). Under NDP the encoder is a
DP-SGD release of node data and is retrained in every fit.
"""
from __future__ import annotations

from targets.gap.accountant import (
    NODE_CALIBRATION,
    dpsgd_schedule,
    edge_claim,
    edge_epsilon,
    gap_claim,
    node_claim,
    node_rdp,
)
from targets.gap.config import GAPConfig
from targets.gap.model import _Classifier, bound_out_degree, rownorm, sum_aggregate, transposed_adjacency
from targets.gap.recorder import GAPTraceStep, side_generator
from targets.gap.stacked import ClassifierBatch, _classifier_init
from targets.gap.target import GAP

__all__ = [
    "GAP", "GAPConfig", "GAPTraceStep", "ClassifierBatch", "NODE_CALIBRATION", "bound_out_degree",
    "dpsgd_schedule", "edge_claim", "edge_epsilon", "gap_claim", "node_claim", "node_rdp", "rownorm",
    "side_generator", "sum_aggregate", "transposed_adjacency",
]
