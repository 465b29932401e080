"""CARIBOU's entries in the bug catalogue (``python -m audit regress``): each an audit and the verdict it
should get (:class:`targets.common.catalogue.Entry`)."""
from __future__ import annotations

from targets.common.catalogue import Entry

# a strong contraction and many hops: M(K, C_L) ≪ K, where releasing every hop costs most
CARIBOU_SHALLOW = {"hops": "20", "contraction": "0.3", "encoder_epochs": "20"}

CATALOGUE = (
    # CARIBOU
    Entry("caribou", "CONSISTENT", trials=400, params={"encoder_epochs": "20"}),
    Entry("caribou", "VIOLATION", bug="no-noise", trials=100, params={"encoder_epochs": "20"}),
    Entry("caribou", "VIOLATION", bug="no-noise", trials=300, mode="one-run", params={"encoder_epochs": "20"}),
    Entry("caribou", "VIOLATION", bug="no-projection", trials=600, params={"encoder_epochs": "20"},
          canary="low-degree-edge", attack="edge-correlation",
          why="unprojected rows carry the previous hops' noise across the canary edge: ⟨X_u, X_v⟩ shifts"),
    Entry("caribou", "CONSISTENT", trials=600, params={"encoder_epochs": "20"}, canary="low-degree-edge",
          attack="edge-correlation", why="the same audit on the correct target (projection bounds the shared noise)"),
    Entry("caribou", "VIOLATION", bug="release-all-hops", epsilon=8, params=CARIBOU_SHALLOW, trials=1000,
          why="all K = 20 hops released while the claim charges M(20, 0.3) = 1.86 compositions; the worst csbm "
              "edge moves each hop by 0.55 of Eq. 6's bound, so the released hops carry μ ≈ 1.8× the claim"),
    Entry("caribou", "CONSISTENT", epsilon=8, params=CARIBOU_SHALLOW, trials=1000, quick=False,
          why="the same audit of the last hop only (the correct release)"),
    # longer audits (not in --quick)
    Entry("caribou", "CONSISTENT", trials=2000, quick=False),
)
