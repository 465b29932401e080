"""Device correctness of every registered target.

* CPU: a run with ``device="cpu"`` never touches CUDA (every CUDA entry point raises while each
  target fits once on csbm and its default attack scores the release).
* CUDA (skipped without a GPU): every target fits and scores with ``device="cuda"``, and a
  mechanism release lives on the device.
* Lint: in the targets' fit paths, tensor factories name their device, or sit on an allow-list of
  CPU-side draws and bookkeeping (CPU generators draw on the CPU; the result is moved).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from attacks.base import auto_attack
from attacks.base import make as make_attack
from canaries.base import auto_canary
from canaries.base import make as make_canary
from targets import base

#: small configurations (seconds per fit on csbm)
FAST: dict[str, dict] = {
    "caribou": {"encoder_epochs": 2, "cm_epochs": 1},
    "dpdgc": {"epochs_encoder": 2, "epochs_classifier": 1, "hidden": 16},
    "dpsgd-gcn": {"steps": 2},
    "edgerand": {"epochs": 2},
    "gap": {"encoder_epochs": 2, "epochs": 1},
    "gaussian": {},
    "gcn": {"epochs": 2},
    "gcon": {"encoder_epochs": 2, "adam_epochs": 5},
    "heterpoisson": {"steps": 2, "hidden": 16},
    "lapgraph": {"epochs": 2},
}


def _fit_and_score(name: str, device: str, graph) -> tuple[object, float]:
    params = {k: v for k, v in FAST.get(name, {}).items() if k in base.config_fields(base.get(name).Config)}
    target = base.build(name, device=device, **params)
    pinned = target.public_params(graph)
    if pinned:
        target = type(target)(base.replace_config(target.config, **pinned))
    attack_name = auto_attack(target, graph)
    pair = make_canary(auto_canary(target, graph, attack_name)).worlds(graph, np.random.default_rng(0), target)
    attack = make_attack(attack_name)
    if hasattr(attack, "bind_target"):
        attack.bind_target(target)
    target.prepare(graph)
    release = target.fit(pair.world(1), torch.Generator().manual_seed(1))
    score = float(attack.score(release, pair, graph))
    assert math.isfinite(score)
    return release, score


def test_every_target_is_covered():
    assert set(base.available()) <= set(FAST)


class _CudaTouched(AssertionError):
    pass


def _raise(*_a, **_k):
    raise _CudaTouched("a device='cpu' run touched CUDA")


@pytest.mark.parametrize("name", sorted(FAST))
def test_cpu_run_never_touches_cuda(name, csbm, monkeypatch):
    assert name in base.available(), f"{name} is no longer registered"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    # (torch.manual_seed queues CUDA seeding lazily without initialising CUDA: not a touch)
    for attr in ("init", "_lazy_init", "synchronize", "current_device", "set_device"):
        if hasattr(torch.cuda, attr):
            monkeypatch.setattr(torch.cuda, attr, _raise)
    monkeypatch.setattr(torch.Tensor, "cuda", _raise)
    to = torch.Tensor.to

    def guarded_to(self, *args, **kwargs):
        for a in (*args, kwargs.get("device")):
            if isinstance(a, (str, torch.device)) and str(a).startswith("cuda"):
                _raise()
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", guarded_to)
    release, _ = _fit_and_score(name, "cpu", csbm)
    for step in release.mechanism or []:
        assert step.output.device.type == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", sorted(FAST))
def test_cuda_smoke(name, csbm):
    assert name in base.available(), f"{name} is no longer registered"
    release, _ = _fit_and_score(name, "cuda", csbm)
    for step in release.mechanism or []:
        assert step.output.device.type == "cuda", f"{name}: {step.name} released on {step.output.device}"
        assert step.mean(csbm).device.type in ("cuda", "cpu")


# ------------------------------------------------------------------ lint
_FACTORY = re.compile(r"torch\.(randn|rand|zeros|ones|empty|full|arange|eye)\(")
#: (file, fragment of the line): CPU-side by design. Draws from the game's CPU generators are made
#: on the CPU (then moved, so results do not depend on the device); index and mask bookkeeping on
#: CPU edge lists; module initialisation before ``.to(device)``.
ALLOWED: list[tuple[str, str]] = [
    ("caribou/model.py", "loops = torch.arange(n)"),
    ("caribou/target.py", "noise = torch.empty((batch, n, h), dtype=x.dtype)"),
    ("caribou/target.py", "generator=rng, dtype=x.dtype, out=noise[j]"),
    # the stacked CMs' per-run bookkeeping (validation accuracy moved to the CPU, epochs seen)
    ("caribou/stacked.py", "best_acc = torch.full((runs,), -1.0)"),
    ("caribou/stacked.py", "best_epoch = torch.zeros(runs, dtype=torch.long)"),
    ("caribou/stacked.py", "torch.full((runs,), epochs, dtype=torch.long)"),
    ("common/dpsgd.py", "torch.rand(n, generator=rng)"),
    ("common/dpsgd.py", "torch.randn(total.shape, generator=rng"),
    ("dpsgd_gcn.py", "loops = torch.arange(n)"),
    ("dpsgd_gcn.py", "torch.rand(1, generator=crng)"),
    ("dpsgd_gcn.py", "torch.rand(m, generator=rng)"),
    ("dpsgd_gcn.py", "params = torch.zeros(k_runs, width)"),
    ("dpsgd_gcn.py", "mask = torch.zeros(k_runs, rows)"),
    ("common/stacked_mlp.py", "out = torch.zeros(len(rngs), width)"),
    ("heterpoisson/stacked.py", "out = torch.zeros(len(rngs), width)"),
    ("common/stacked_mlp.py", "torch.randn(d, generator=rng"),
    ("edgerand.py", "torch.zeros(n * (n - 1) // 2"),
    ("edgerand.py", "torch.rand("),
    ("gcn.py", "torch.ones(row.numel()"),
    ("gcn.py", "torch.zeros(num_nodes, dtype=dtype)"),
    ("gcn.py", "loops = torch.arange(num_nodes)"),
    ("gcn.py", "torch.ones(num_nodes, dtype=dtype)"),
    ("lapgraph.py", "kept = torch.zeros(m"),
    # the stacked GCN: dropout masks drawn from CPU generators, graph indices and initial rows
    # built on CPU, then moved to the run's device
    ("common/stacked_gcn.py", "_HALF = ((torch.arange(256)"),
    ("common/stacked_gcn.py", "torch.rand(sum(sizes), generator=g)"),
    ("common/stacked_gcn.py", "torch.zeros(1, dtype=torch.long), torch.bincount"),
    ("common/stacked_gcn.py", "pos = torch.full((adj.size(0),)"),
    ("common/stacked_gcn.py", "pos[keep] = torch.arange(keep.numel())"),
    ("common/stacked_gcn.py", "dense = torch.zeros(h * f + h + c * h + c)"),
    ("common/stacked_gcn.py", "row = torch.zeros(self.width)"),
    ("common/stacked_gcn.py", "best = torch.full((k_runs,), -1.0"),
    ("gaussian.py", "torch.randn(mean.shape, generator=rng"),
    # the sensitivity probe's adapters build CPU graphs and CPU float64 sums
    ("gcon/probe.py", "torch.zeros(2, dtype=torch.bool)"),
    ("heterpoisson/probe.py", "out = torch.zeros(d, dtype=torch.float64)"),
    ("dpdgc/target.py", "masks = [torch.zeros(n, dtype=torch.bool)"),
    ("dpdgc/target.py", "values = torch.ones(edge_index.size(1)"),
    ("dpdgc/target.py", "generator=rng"),
    ("dpdgc/dpemb.py", "generator=rng"),
    ("dpdgc/dpemb.py", "params = torch.empty(k_runs, n + 1, h)"),
    ("dpdgc/dpemb.py", "grads = torch.empty(k_runs, n + 1, h)"),
    ("dpdgc/target.py", "crow = torch.zeros(n + 1, dtype=torch.long)"),
    ("gap/model.py", "torch.rand(src.numel(), generator=g"),
    ("gap/recorder.py", "torch.rand(1, generator=self.coins)"),
    ("gap/model.py", "rank = torch.arange(src.numel())"),
    ("gap/stacked.py", "torch.empty(x.shape[1:], dtype=x.dtype).bernoulli_"),
    ("gap/stacked.py", "torch.empty(d_out"),
    ("gap/stacked.py", "torch.ones(width)"),
    ("gap/stacked.py", "torch.zeros(width)"),
    ("gcon/accountant.py", "generator=rng"),
    ("heterpoisson/accountant.py", "generator=rng"),
    ("heterpoisson/accountant.py", "torch.empty(shape_d if per_coordinate"),
    ("heterpoisson/model.py", "torch.zeros(1)"),
    ("heterpoisson/target.py", "generator=rng"),
    ("heterpoisson/target.py", "generator=gen"),
    ("heterpoisson/target.py", "generator=run.canary_rng"),
    ("heterpoisson/target.py", "slot_of = torch.full((graph.num_nodes,), -1"),
    ("heterpoisson/target.py", "slot_of[train_idx] = torch.arange(m)"),
    ("heterpoisson/target.py", "mask = torch.zeros(k_runs, rows)"),
    ("heterpoisson/target.py", "stars = torch.zeros(k_runs"),
    ("heterpoisson/stacked.py", "generator=rng"),
    ("heterpoisson/stacked.py", "is_central = torch.zeros(k_runs, n"),
    ("heterpoisson/stacked.py", "pos = torch.full((k_runs, n), -1"),
    ("heterpoisson/stacked.py", "params = torch.zeros(len(rngs), lay.width)"),
    ("heterpoisson/target.py", "local = torch.full((n,), -1"),
    ("heterpoisson/target.py", "torch.arange(centers.numel())"),
    ("heterpoisson/target.py", "is_query = torch.zeros(graph.num_nodes"),
    ("heterpoisson/target.py", "first = torch.zeros(graph.num_nodes"),
    ("heterpoisson/target.py", "rank = torch.arange(dst.numel())"),
    ("heterpoisson/target.py", "torch.arange(graph.num_nodes) if nodes is None"),
]
#: modules outside this lint (no tensors on a device)
SKIP = {"accounting.py", "base.py", "registry.py", "trace.py", "__init__.py"}


def test_tensor_factories_name_their_device():
    root = Path(base.__file__).resolve().parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if path.name in SKIP and "/" not in rel or path.name == "__init__.py":
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if not _FACTORY.search(code) or "device" in code or "_like(" in code:
                continue
            if any(rel == f and frag in code for f, frag in ALLOWED):
                continue
            offenders.append(f"{rel}:{no}: {line.strip()}")
    assert not offenders, "tensor factories without device= (move the result, or allow-list it):\n" + \
        "\n".join(offenders)


def test_on_cpu_gives_the_same_configuration_on_the_cpu():
    import dataclasses

    target = base.build("gcon")
    assert base.on_cpu(target) is target
    target.config = dataclasses.replace(target.config, device="cuda")  # as a CUDA run's target would be
    target.device = torch.device("cuda")
    twin = base.on_cpu(target)
    assert type(twin) is type(target) and twin.device.type == "cpu"
    assert twin.config == dataclasses.replace(target.config, device="cpu")


def test_noise_generator_is_the_trials_own_on_the_cpu():
    rng = torch.Generator().manual_seed(3)
    assert base.noise_generator(rng, "cpu") is rng
    assert base.noise_generator(rng, torch.device("cpu")) is rng


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_noise_depends_on_the_trial_alone(csbm):
    """A trial's CUDA release is the same batched or alone (the Gaussian reference sums A·X̂ on the CPU)."""
    target = base.build("gaussian", device="cuda")
    seeds = [11, 12, 13]
    batched = target.fit_batch(csbm, [torch.Generator().manual_seed(s) for s in seeds])
    alone = [target.fit(csbm, torch.Generator().manual_seed(s)) for s in seeds]
    for b, a in zip(batched, alone):
        assert b.mechanism[0].output.device.type == "cuda"
        assert torch.equal(b.mechanism[0].output, a.mechanism[0].output)
    assert not torch.equal(batched[0].mechanism[0].output, batched[1].mechanism[0].output)
