"""Leak only through the api view: the mechanism release is correct, but the prediction endpoint
computes its posteriors from the noiseless aggregate (the cached ``means`` instead of the noisy
release). The canary's endpoints get posteriors that differ between the worlds, with no noise:
ε = ∞."""
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class ApiNoiseless(base.Aggregation):
    levels = ("mechanism", "api")

    def extra_views(self, graph):
        logits = self.means(graph)[0]

        def predict(query=None, nodes=None):
            rows = logits if nodes is None else logits[torch.as_tensor(nodes, dtype=torch.long)]
            return torch.softmax(rows, dim=1)

        return {"api": predict}
