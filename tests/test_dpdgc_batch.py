"""DPDGC's vectorised fit: fit_batch(g, rngs)[j] releases what fit(g, rngs[j]) does, and the
classifier (api, its weights, the accuracy) is trained only when read, from randomness split off
at fit time."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from targets.base import build, resolve
from targets.dpdgc import dpemb
from targets.common.trace import DPSGDTrace

FAST = dict(epochs_encoder=3, epochs_classifier=2, hidden=16)


def _gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


@pytest.mark.parametrize("kw", [dict(), dict(unit="node", k=2), dict(unit="node", max_degree=5)])
def test_fit_batch_equals_fit(csbm, kw):
    t = build("dpdgc", **FAST, **kw)
    batch = t.fit_batch(csbm, _gens([3, 4, 5]))
    for j, seed in enumerate([3, 4, 5]):
        one = t.fit(csbm, torch.Generator().manual_seed(seed))
        assert torch.equal(batch[j].mechanism[0].output, one.mechanism[0].output)
        assert torch.equal(batch[j].weights["emb.W"], one.weights["emb.W"])
        assert torch.equal(batch[j].api(csbm), one.api(csbm))
        assert batch[j].info == one.info
    assert not torch.equal(batch[0].mechanism[0].output, batch[1].mechanism[0].output)


def test_batched_trace_replays(csbm):
    t = build("dpdgc", unit="node", k=2, **FAST)
    rel = t.fit_batch(csbm, _gens([7, 8]))[1]
    lone = t.fit(csbm, torch.Generator().manual_seed(8))
    a, b = rel.view("trace"), lone.view("trace")  # the replay checks it gives back the released W
    assert all(torch.equal(x.noisy, y.noisy) for x, y in zip(a, b))


def test_classifier_is_lazy_and_reading_it_changes_nothing(csbm):
    t = build("dpdgc", **FAST)
    calls = []
    train = t._train_classifier
    t._train_classifier = lambda *a, **k: calls.append(1) or train(*a, **k)
    read = t.fit(csbm, torch.Generator().manual_seed(1))
    unread = t.fit(csbm, torch.Generator().manual_seed(1))
    assert torch.equal(read.mechanism[0].output, unread.mechanism[0].output)
    assert not calls  # a mechanism-only audit trains no classifier
    acc = resolve(read.info["accuracy"])
    assert 0 <= acc["test"] <= 1 and len(calls) == 1
    assert "clf.head.weight" in read.weights and len(calls) == 1
    assert torch.equal(read.api(csbm), unread.api(csbm)) and len(calls) == 2


def test_dpemb_is_dp_adam_on_clipped_per_example_gradients(csbm):
    """DP-Emb against autograd and torch.optim.Adam: every step's clean sum is the batch's
    per-example gradients of CE(SELU(A_i W + b) R), each clipped to C; W and b follow Adam
    (L2 weight decay) on the noisy sum / B, W's rows projected back to c."""
    c = 0.5
    t = build("dpdgc", epochs_encoder=1, hidden=16, batch_size=32, norm_scale=c)
    cfg, n, h = t.config, csbm.num_nodes, 16
    y, classes = csbm.y, int(csbm.y.max()) + 1
    train_idx = torch.nonzero(t._masks(csbm)[0]).view(-1)
    gen = torch.Generator().manual_seed(5)
    w0, b0, r = dpemb._init(n, h, classes, torch.Generator().set_state(gen.get_state()))
    trace = DPSGDTrace(noise="gaussian")
    w, b, head = t._train_encoder(t._edges(csbm, 0), n, y, train_idx, classes,
                                  t.claim(csbm).details["noise_multiplier"], gen, None, trace)
    assert torch.equal(head, r) and len(trace) == 180 // 32
    a = torch.zeros(n, n)
    a[csbm.edge_index[0], csbm.edge_index[1]] = 1.0
    ref_w = (w0 * (c / w0.norm(dim=1, keepdim=True))).requires_grad_()
    ref_b = b0.clone().requires_grad_()
    opt = torch.optim.Adam([ref_w, ref_b], lr=cfg.lr, weight_decay=cfg.encoder_weight_decay)
    for step in trace:
        clean = torch.zeros(n * h + h)
        for i in step.central.tolist():
            loss = F.cross_entropy((F.selu(a[i] @ ref_w + ref_b) @ r)[None], y[i:i + 1])
            g = torch.cat([x.reshape(-1) for x in torch.autograd.grad(loss, (ref_w, ref_b))])
            clean += g * min(1.0, cfg.clip / float(g.norm()))
        assert torch.allclose(step.clean, clean, rtol=1e-4, atol=1e-6)
        ref_w.grad, ref_b.grad = step.noisy[: n * h].view(n, h) / 32, step.noisy[n * h:] / 32
        opt.step()
        with torch.no_grad():
            ref_w.mul_(c / ref_w.norm(dim=1, keepdim=True))
    assert torch.allclose(w, ref_w.detach(), rtol=1e-4, atol=1e-6)
    assert torch.allclose(b, ref_b.detach(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kw", [dict(), dict(unit="node", max_degree=5)])
def test_thread_groups_change_no_float(csbm, kw, monkeypatch):
    """Run groups trained on parallel threads give back each run's lone floats."""
    t = build("dpdgc", **FAST, **kw)
    seeds = [3, 4, 5, 6, 7]
    releases = {}
    for threads in (1, 2, 5):
        monkeypatch.setattr(dpemb, "threads_for", lambda runs, min_group=4, k=threads: k)
        releases[threads] = t.fit_batch(csbm, _gens(seeds))
    for j in range(len(seeds)):
        outs = [releases[k][j].mechanism[0].output for k in (1, 2, 5)]
        assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_dpdgc_run_is_the_same_for_any_batch_and_jobs(stored_runs):
    # batch 5: 12 trials per world in sub-batches 5 and 7 (the last 2 join), 2 thread groups of 7
    runs = stored_runs("dpdgc", {k: str(v) for k, v in FAST.items()},
                       [("one", 1, 1), ("auto", 0, 1), ("odd", 3, 1), ("tail", 5, 1), ("jobs", 0, 2)])
    rows = runs["one"][0]
    assert len(rows) == 24 and len({sc for _, _, sc in rows}) == 24
    assert all(r == runs["one"] for r in runs.values())


def test_threads_follow_cores_and_group_size(monkeypatch):
    monkeypatch.setattr(dpemb.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert dpemb.threads_for(16) == 2 and dpemb.threads_for(7) == 1 and dpemb.threads_for(1) == 1
    assert dpemb.threads_for(3, 1) == 2


def test_sparse_product_path_trains_the_same_model(csbm):
    """The step CUDA runs (A's sparse products instead of the CSR gather/scatter), exercised on
    CPU: the same W up to float rounding (the two sum each row's terms in different orders)."""
    t = build("dpdgc", **FAST)
    n, y, classes = csbm.num_nodes, csbm.y, int(csbm.y.max()) + 1
    train_idx = torch.nonzero(t._masks(csbm)[0]).view(-1)
    edges = t._edges(csbm, 0)
    adj = t._adjacencies(edges, n)
    sparse = (t._adjacency(edges, n, torch.float32), t._adjacency(edges.flip(0), n, torch.float32))
    batch, steps, _ = t._schedule(train_idx.numel())
    sched = dpemb.Schedule(n=n, hidden=16, batch=batch, steps=steps, std=t._encoder_noise_std(2.0), lr=t.config.lr,
                           weight_decay=t.config.encoder_weight_decay, clip=t.config.clip, project=t._project)
    runs = {}
    for name, a in [("csr", adj), ("sparse", dataclasses.replace(adj, sparse=sparse))]:
        runs[name] = dpemb.train(a, sched, y, train_idx, classes, _gens([3, 4]), threads=1)
    for (w, b, r), (w2, b2, r2) in zip(runs["csr"], runs["sparse"]):
        assert torch.equal(r, r2) and not torch.equal(w, torch.zeros_like(w))
        assert torch.allclose(w, w2, rtol=1e-4, atol=1e-6 * t.config.norm_scale)
        assert torch.allclose(b, b2, rtol=1e-4, atol=1e-6)
