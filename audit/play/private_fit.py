"""One private fit of a target on a dataset, and the accuracy it reports.

``python -m audit train`` prints it and the campaign's utility column reads it: one function, so both
measure the graph the audit plays on (the dataset after the target's own preprocessing, e.g. the
papers' dropping of isolated nodes).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from audit.play import data as datasets
from audit.play.run_spec import preprocessed
from targets import base as targets


@dataclass(frozen=True)
class FittedAccuracy:
    """The claim of the fit's target on the preprocessed graph, the accuracy its release reports
    (None for a target that is not a classifier) and the seconds the fit took."""

    claim: targets.Claim
    accuracy: Any
    seconds: float

    def test_percent(self) -> float | None:
        """Test accuracy in %, from a ``{"test": …}`` (or ``"test_acc"``) dict or a bare number."""
        acc = self.accuracy
        if isinstance(acc, dict):
            test = acc.get("test", acc.get("test_acc"))
            return None if test is None else 100.0 * float(test)
        if isinstance(acc, (int, float)):
            return 100.0 * float(acc)
        return None


def fit_accuracy(target: targets.Target, dataset: str, *, root: str | None, seed: int) -> FittedAccuracy:
    """Load `dataset`, preprocess it as `target` does, fit once with generator seed `seed`; on one thread
    (:func:`targets.one_torch_thread`), as every audit's fit, so the figure does not follow the machine's thread count."""
    with targets.one_torch_thread():
        graph = preprocessed(target, datasets.load(dataset, root=root, seed=seed))
        claim = target.claim(graph)
        t0 = time.time()
        release = target.fit(graph, torch.Generator().manual_seed(seed))
        return FittedAccuracy(claim, targets.resolve(release.accuracy), time.time() - t0)
