"""Deviant (entries released without noise): noise is added to the training nodes' rows only, as if
the privacy unit were the training set; every other row is released exact."""
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


class TrainRowsOnly(base.Aggregation):
    def release(self, graph, means, noise):
        mask = graph.train_mask[:, None].to(means[0].dtype)
        return [m + z * mask for m, z in zip(means, noise)]
