"""GAP's entries in the bug catalogue (``python -m audit regress``): each an audit and the verdict it
should get (:class:`targets.common.catalogue.Entry`)."""
from __future__ import annotations

from targets.common.catalogue import FINDING, Entry

GAP_FAST = {"encoder_epochs": "20", "epochs": "1"}
GAP_NODE_HUB = {"unit": "node", "max_degree": "2", "encoder_epochs": "1", "epochs": "1"}
# a trained classifier (20 epochs), so that its read-out of hop 1 carries the class contrast
GAP_TRAINED = {"encoder_epochs": "20", "epochs": "20"}
# the default audits GAP's edge level with an undirected edge: the directed-edge finding
GAP_DIRECTED = "the default's canary is an undirected edge: GAP's directed-edge finding"
# B = N − 1 on csbm's 180 training nodes: the loader runs two Poisson(179/180) steps per epoch
GAP_NODE_TRACE = {"unit": "node", "hops": "1", "epochs": "0", "encoder_epochs": "8", "batch_size": "179",
                  "trace_module": "encoder"}

CATALOGUE = (
    # GAP (edge level)
    Entry("gap", "CONSISTENT", trials=200, params=GAP_FAST, canary="worst-directed-edge", auto_expect=FINDING,
          auto_note=GAP_DIRECTED, why="GAP's claim covers one directed entry of Aᵀ, so its canary is one directed edge"),
    Entry("gap", "CONSISTENT", epsilon=8, trials=2000, params={"edge_unit": "undirected"},
          why="Δ = √2 charged for an undirected edge: the undirected canary is covered"),
    Entry("gap", "VIOLATION", epsilon=8, trials=2000,
          finding="GAP charges Δ = 1 per directed entry of the adjacency, but the graphs it is evaluated on are "
                  "undirected: one (undirected) edge changes two rows per hop, μ is √2 times the claimed one. "
                  "Measured: gdp ε_lb 11.76 vs claimed 8 (csbm, 2,000 trials); CONSISTENT with a directed canary "
                  "or edge_unit=undirected."),
    Entry("gap", "VIOLATION", bug="no-noise", trials=100, params=GAP_FAST),
    Entry("gap", "VIOLATION", bug="fresh-inference-noise", epsilon=4, params=GAP_TRAINED, canary="worst-directed-edge",
          attack="fresh-query", estimator="gdp", trials=400, auto_note=GAP_DIRECTED,
          why="every api call re-aggregates the private edges with fresh noise: 64 probe/control query pairs read "
              "at the canary's endpoint; μ_lb 1.73-3.40 against the claimed μ 1.04 (seeds 0-4)"),
    Entry("gap", "CONSISTENT", epsilon=4, params=GAP_TRAINED, canary="worst-directed-edge", attack="fresh-query",
          estimator="gdp", trials=400, quick=False, auto_expect=FINDING, auto_note=GAP_DIRECTED,
          why="the same audit of the cached api (no query moves it)"),
    # GAP (node level): a hub canary with more out-edges than the degree bound D
    Entry("gap", "VIOLATION", bug="no-degree-bound", trials=600, params=GAP_NODE_HUB, canary="insert-hub-node",
          attack="mechanism-lrt", why="the hub's 180 out-edges (every csbm training node) aggregated while PMA charges √D = √2"),
    Entry("gap", "CONSISTENT", trials=600, params=GAP_NODE_HUB, canary="insert-hub-node", attack="mechanism-lrt",
          why="the same audit with the bound in place (mean under a public bound seed: no exact LLR)"),
    # GAP (node level): the encoder's DP-SGD trace with a gradient canary
    Entry("gap", "VIOLATION", bug="poisson-loader-steps", epsilon=8, params=GAP_NODE_TRACE, attack="gradient-lrt",
          estimator="gdp", trials=1000,
          why="16 encoder steps run, 8 accounted (true ε 10.54). gdp at the LLR's 0 bounds the total variation; "
              "for this trace the TV-matched Gaussian's ε is below the true ε (PLD check in tests/test_gap_trace.py). "
              "The default catches it with the subsampled-Gaussian fit on the 16 released steps, and its sampler "
              "record says the trace releases 16 steps where the accountant charged 8"),
    Entry("gap", "CONSISTENT", epsilon=8, params=GAP_NODE_TRACE, attack="gradient-lrt", estimator="gdp", trials=1000,
          quick=False, why="the same audit on the correct loader (8 steps, true ε 6.66)"),
    Entry("gap", "CONSISTENT", epsilon=4, trials=1000, canary="worst-directed-edge", quick=False,
          auto_expect=FINDING, auto_note=GAP_DIRECTED),
)
