"""Correct control (an api view that post-processes the release): the prediction endpoint computes
its posteriors from the noisy release, so it adds nothing to the mechanism's ε."""
from pathlib import Path

import torch

from targets.common.registry import load_file
from targets.base import Release

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class ApiFromRelease(base.Aggregation):
    levels = ("mechanism", "api")

    def fit(self, graph, rng):
        release = super().fit(graph, rng)
        logits = release.mechanism[0].output

        def predict(query=None, nodes=None):
            rows = logits if nodes is None else logits[torch.as_tensor(nodes, dtype=torch.long)]
            return torch.softmax(rows, dim=1)

        return Release(mechanism=release.mechanism, api=predict)
