"""DPDGC's entries in the bug catalogue (``python -m audit regress``): each an audit and the verdict it
should get (:class:`targets.common.catalogue.Entry`)."""
from __future__ import annotations

from targets.common.catalogue import Entry

DPDGC_FAST = {"unit": "edge", "epochs_encoder": "5", "epochs_classifier": "1"}
# k-neighbour GDP with g = 26 and full-batch DP-Emb (q = 1): the trace LLR is exactly Gaussian
DPDGC_KNB_FULL = {"unit": "node", "k": "25", "batch_size": "1000", "epochs_encoder": "4", "epochs_classifier": "1",
                  "hidden": "8"}

CATALOGUE = (
    # DPDGC (edge level)
    Entry("dpdgc", "CONSISTENT", trials=100, params=DPDGC_FAST),
    Entry("dpdgc", "VIOLATION", bug="no-noise", trials=100, params=DPDGC_FAST),
    Entry("dpdgc", "VIOLATION", bug="norm-noop", trials=100, params={**DPDGC_FAST, "norm_scale": "1e-8"},
          why="weight rows keep their trained norms ≫ c (the paper's c = 1e-8) while the noise is scaled to c"),
    # DPDGC (k-neighbour level): DP-Emb's DP-Adam trace with a gradient canary of g·C
    Entry("dpdgc", "VIOLATION", bug="sqrt-group-noise", epsilon=8, params=DPDGC_KNB_FULL, attack="gradient-lrt",
          estimator="gdp", trials=200, why="DP-Emb noise 2σ√g·C against the claimed 2σg·C (g = 26)"),
    Entry("dpdgc", "CONSISTENT", epsilon=8, params=DPDGC_KNB_FULL, attack="gradient-lrt", estimator="gdp",
          trials=200, why="the same trace audit with linear group scaling"),
)
