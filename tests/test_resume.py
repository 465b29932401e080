"""Stored trials are reused only for the same options and the same code (issue #21)."""
import textwrap

import pytest

from audit.play.game import AuditSpec, run_audit

_TARGET = '''
import math
from dataclasses import dataclass

import torch

from targets.common.accounting import gdp_epsilon, gdp_mu
from targets.base import Claim, MechanismStep, Release, Target, TargetConfig

NOISE_SCALE = {scale}  # 1.0: as claimed; 0.0: a bug that drops the noise


@dataclass
class EditedConfig(TargetConfig):
    unit: str = "edge"


class Edited(Target[EditedConfig]):
    name = "edited"
    Config = EditedConfig
    levels = ("mechanism",)

    def claim(self, graph):
        delta = self.config.delta or 1e-5
        mu = gdp_mu(self.config.epsilon, delta)
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge", gdp_mu=mu,
                     details={{"noise_std": math.sqrt(2) / mu}})

    def noiseless(self, graph):
        x = graph.x / graph.x.norm(dim=1, keepdim=True).clamp_min(1e-12)
        out = torch.zeros_like(x)
        out.index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])
        return out

    def fit(self, graph, rng):
        std = self.claim(graph).details["noise_std"]
        mean = self.noiseless(graph)
        out = mean + NOISE_SCALE * std * torch.randn(mean.shape, generator=rng)
        return Release(mechanism=[MechanismStep(output=out, mean=self.noiseless, noise_std=std)])
'''


def _write(path, scale):
    path.write_text(textwrap.dedent(_TARGET.format(scale=scale)))


def _run(path, out, **kw):
    spec = AuditSpec(target=f"{path}:Edited", epsilon=1.0, dataset="csbm:n=120", trials=200, seed=3,
                     estimator="cp")
    return run_audit(spec, out=out, progress=False, **kw)


@pytest.mark.parametrize("first,second", [(0.0, 1.0), (1.0, 0.0)], ids=["fixed", "broken"])
def test_an_edited_user_module_replays_and_its_verdict_follows_the_code(tmp_path, first, second):
    path = tmp_path / "user_target.py"
    _write(path, first)
    a = _run(path, tmp_path / "res")
    assert a.verdict == ("VIOLATION" if first == 0.0 else "CONSISTENT")
    assert a.reused_trials == 0
    again = _run(path, tmp_path / "res")  # same code, same options: every trial reused, same verdict
    assert again.reused_trials == 200 and again.trials_played == 0 and again.eps_lb == a.eps_lb
    _write(path, second)  # the user edits the trainer between runs
    b = _run(path, tmp_path / "res")
    assert b.reused_trials == 0 and b.trials_played == 200
    assert b.code["sources"] != a.code["sources"] and b.key != a.key
    assert b.verdict == ("VIOLATION" if second == 0.0 else "CONSISTENT")


def test_fresh_replays_every_trial(tmp_path):
    path = tmp_path / "user_target.py"
    _write(path, 1.0)
    a = _run(path, tmp_path / "res")
    b = _run(path, tmp_path / "res", fresh=True)
    assert b.reused_trials == 0 and b.trials_played == 200 and b.eps_lb == a.eps_lb  # same seeds, same trials
