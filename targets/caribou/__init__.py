"""CARIBOU: convergent-privacy DP-GNN with Contractive Graph Layers (Zheng, Li, Li, Wang, NDSS 2026).

Pipeline (specs/caribou.md §2, §4):

0. Pre-processing (:meth:`Caribou.preprocess`, for the CLI to call): isolated nodes are dropped, as
   the paper (GAP's loader) does, so that D_min ≥ 1.
1. Encoder: GAP's encoder (``Linear → BN → SELU → dropout → Linear``; the linear output, rows
   scaled to unit norm, is X⁽⁰⁾ (n × h); a ``BN → SELU → dropout → Linear`` head), pre-trained with
   cross-entropy on the training labels, keeping the epoch of best validation accuracy (GAP's
   trainer). Edge level: trained without DP (it never sees edges). Node level: DP-SGD.
2. PCMP (Algorithm 1): K hops of the Contractive Graph Layer (Eq. 4)
   ``X ← C_L·(α1·Â X + α2·Mean(X)) + β·X⁽⁰⁾``, then ``X ← X + N(0, (Δσ)²)`` entrywise, then each row
   projected to the unit ball. Only X⁽ᴷ⁾ is released (hidden-state assumption).
3. Classification module: GAP's multi-input MLP on two channels, X⁽⁰⁾ and X⁽ᴷ⁾ (a linear base
   per channel, concatenated, row-normalised, ``BN → SELU → dropout → Linear``); Adam, best
   validation checkpoint; optional training-time dropout of the whole X⁽⁰⁾ channel
   (``x0_dropout``). Node level: DP-SGD, no batch-norm, no dropout. Edge level, the CMs of one
   ``fit_batch`` are trained together when any of them is first needed
   (:mod:`~targets.caribou.stacked`), each bitwise as it is trained alone.

Utility (issue #20, results/utility.md): the earlier pipeline lost accuracy, not privacy: (a) the
CM, trained on the same nodes the encoder had memorised, fitted X⁽⁰⁾ and ignored X⁽ᴷ⁾ (Cora
10/10/20, noise off: 72% on both channels, 85% on X⁽ᴷ⁾ alone) — hence ``x0_dropout``, chosen on
validation; (b) the encoder had no validation checkpoint and no dropout and embedded a
post-activation (55% on Cora against 62% now). The hyper-parameter grid (K, C_L, α1, β,
``x0_dropout``) is searched on validation accuracy by ``benchmarks/utility.py``.

Claim (the paper's accounting, literally): sensitivity Eq. 6 (edge; one *undirected* edge, √2
over the two endpoint rows) or Eq. 8 (node); the convergent multiplier M(K, C_L) (§3.2; PAM
options ``kprime`` and ``linear``); μ = sqrt(M)/σ (Theorem 6) converted exactly (``gdp``) or
Theorem 11's RDP with the classic conversion (``rdp_paper``). Node level adds the two DP-SGD
phases' RDP (one shared multiplier). Inference on a query graph re-runs PCMP with fresh noise:
``queries`` such releases compose (μ·sqrt(Q)).

Views: ``api`` (predict; on the training graph it reuses X⁽ᴷ⁾, on another graph it is a fresh
release), ``weights`` (CM parameters), ``mechanism`` (X⁽ᴷ⁾; with ``release-all-hops`` every hop).
Shapes: X⁽ᵏ⁾ is n × h; posteriors n × classes.

Modules: :mod:`~targets.caribou.config` (:class:`CaribouConfig`), :mod:`~targets.caribou.accountant`
(the sensitivities of Eq. 6/8 and the convergent multiplier), :mod:`~targets.caribou.model` (Â, the
CGL, projection, degree bound, encoder and CM), :mod:`~targets.caribou.stacked` (the edge-level
CMs of a batch trained stacked), :mod:`~targets.caribou.target` (:class:`Caribou`).
"""
from __future__ import annotations

from targets.caribou.accountant import (
    c_of, compositions, convergent_multiplier, edge_sensitivity, node_sensitivity)
from targets.caribou.config import CaribouConfig
from targets.caribou.model import (
    ClassificationModule, Encoder, bound_degree, cgl, feature_fingerprint, gcn_operator, gcn_propagate, project)
from targets.caribou.target import Caribou

__all__ = [
    "Caribou", "CaribouConfig", "ClassificationModule", "Encoder", "bound_degree", "c_of", "cgl", "compositions",
    "convergent_multiplier", "edge_sensitivity", "feature_fingerprint", "gcn_operator", "gcn_propagate",
    "node_sensitivity", "project",
]
