"""Throughput of the audit game: trials per second, batched against one trial per call.

Each row plays one (target, attack, level) audit through :func:`audit.play.game.run_audit` twice with
the same seed: with the run's batch size (auto, or ``--batch``) and with ``batch=1`` (one ``fit``
per trial), each in its own temporary results folder. It reports trials/s over the trials phase
(``trials_wall_s`` of the result: worker setup, ``prepare``, training and scoring; not the
dataset load or the canary choice) and checks identity: the scores of the trials both runs
played must be equal (bitwise; the largest difference is printed otherwise).

Rows: gaussian, caribou, gap and gcon on the ``mechanism`` view (mechanism-lrt), DPDGC's (whose
mechanism trains DP-Emb in every trial), HeterPoisson's (DP-SGD trained in every trial, gradient-lrt
on the trace), GAP's, CARIBOU's and the non-private GCN's full training (api view with LinkTeller,
which trains the classifier on every release), and on the CPU the loky backend with 1 and 2 jobs and a
Dask LocalCluster with 1 and 2 workers (caribou, batched). Every row runs on each device of
``--devices`` (default ``cpu,cuda``; the CUDA rows are skipped without a GPU).

    python benchmarks/throughput.py                       # Cora (default) and csbm
    python benchmarks/throughput.py --dataset csbm --trials 256 --trials-one 32

Each row also reports the **noise-draw floor**: the time of one trial's own random draws alone
(every call that draws from the trial's generator during one ``fit`` on the row's world 1,
recorded with a ``TorchFunctionMode`` and replayed, timed, on fresh ``torch.Generator``s of the
same type seeded as the game seeds trials: e.g. the Gaussian reference's one n×f normal draw,
CARIBOU's K hop draws, GAP's hop draws), measured in the same process, and the ratio of the
batched trial's cost (1 / trials/s) to it: how far a row is from "draw the noise and nothing else";
and the cost of ``fit_batch`` alone per trial (16 trials after ``prepare``: no game setup, no
scoring) with its ratio to the floor, which separates the target's own work from the game's.
Draws from torch's global RNG (module initialisation under ``seeded``) are not counted.

Not a test: timings depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.play.game import AuditSpec, run_audit, setup_run, trial_seed  # noqa: E402
from audit.records.store import Store  # noqa: E402


@dataclass
class Row:
    label: str
    spec: AuditSpec
    trials: int  # batched run
    trials_one: int  # batch=1 run (0: no baseline row)
    jobs: int = 1
    backend: str = "loky"
    workers: int = 0  # Dask LocalCluster workers (backend dask)
    floor: bool = True  # measure the noise-draw floor (not for the backend rows: same target as above)
    results: dict = field(default_factory=dict)


def _scores(result: dict) -> list[tuple[int, int, float]]:
    with Store(result["store"]) as s:
        return s.trials(result["key"])


def _play(spec: AuditSpec, *, jobs: int = 1, backend: str = "loky", scheduler: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="throughput-") as out:
        result = run_audit(spec, out=out, jobs=jobs, backend=backend, scheduler=scheduler,
                           progress=False).to_dict()
        result["rows"] = _scores(result)
    return result


def _cluster(workers: int):
    from dask.distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


def run_row(row: Row) -> None:
    scheduler, cluster = None, None
    if row.backend == "dask":
        cluster = _cluster(row.workers)
        scheduler = cluster.scheduler_address
    try:
        spec = replace(row.spec, trials=row.trials)
        row.results["batched"] = _play(spec, jobs=row.jobs, backend=row.backend, scheduler=scheduler)
        if row.trials_one:
            spec = replace(row.spec, trials=row.trials_one, batch=1)
            row.results["one"] = _play(spec, jobs=row.jobs, backend=row.backend, scheduler=scheduler)
        if row.floor:
            row.results["floor"] = noise_floor(row.spec)
    finally:
        if cluster is not None:
            cluster.close()


class _DrawRecorder(torch.overrides.TorchFunctionMode):
    """Records every torch call that draws from a ``torch.Generator`` (``generator=`` keyword)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(kwargs.get("generator"), torch.Generator):
            rest = {k: v for k, v in kwargs.items() if k not in ("generator", "out")}
            out = kwargs.get("out")
            method = bool(args) and isinstance(args[0], torch.Tensor)  # in place: t.normal_(..., generator=)
            shape = (tuple(args[0].shape), args[0].dtype, args[0].device) if method else None
            buf = (tuple(out.shape), out.dtype, out.device) if isinstance(out, torch.Tensor) else None
            dev = kwargs["generator"].device
            self.calls.append((func, args[1:] if method else args, rest, shape, buf, dev))
        return func(*args, **kwargs)


def noise_floor(spec: AuditSpec, repeats: int = 8, fits: int = 16) -> tuple[float, int, int, float]:
    """(seconds per trial of the trial's own draws alone, draw calls, numbers drawn, seconds per
    trial of ``fit_batch`` alone) for `spec`.

    One ``fit`` on world 1 of a random-edge canary is recorded; its draws are replayed (same
    functions, shapes, dtypes, devices) on `repeats` fresh CPU generators seeded like trials. The
    last number times one ``fit_batch`` of `fits` trials after ``prepare`` (no game, no scoring).
    """
    from canaries.base import make as make_canary

    graph, target, _ = setup_run(replace(spec, trials=8))
    pair = make_canary("random-edge").worlds(graph, np.random.default_rng(0), target)
    world = pair.world(1)
    target.prepare(world)
    best, calls, numbers, devices = draw_floor(target, world, spec.seed, repeats)
    sync = torch.cuda.synchronize if any(d.type == "cuda" for d in devices) else (lambda: None)
    gens = [torch.Generator().manual_seed(trial_seed(spec.seed, i)) for i in range(fits)]
    sync()
    t = time.perf_counter()
    target.fit_batch(world, gens) if getattr(target, "batched", False) else [target.fit(world, g) for g in gens]
    sync()
    return best, calls, numbers, (time.perf_counter() - t) / fits


def draw_floor(target, world, seed: int, repeats: int = 8, clock=time.perf_counter) -> tuple[float, int, int, set]:
    """(seconds of one trial's own draws alone, draw calls, numbers drawn, devices drawn on): one
    ``fit`` of the prepared `target` on `world` is recorded and its draws replayed on `repeats`
    fresh generators seeded like trials (the best time by `clock`: wall, or ``time.process_time``
    for CPU)."""
    rec = _DrawRecorder()
    with rec:
        target.fit(world, torch.Generator().manual_seed(trial_seed(seed, 0)))
    numbers = 0
    plan = []
    devices = set()
    for func, args, kwargs, shape, buf, dev in rec.calls:
        devices.add(dev)
        pre = torch.empty(shape[0], dtype=shape[1], device=shape[2]) if shape else None
        out = torch.empty(buf[0], dtype=buf[1], device=buf[2]) if buf else None
        numbers += pre.numel() if pre is not None else out.numel() if out is not None else 0
        plan.append((func, args, kwargs, pre, out, dev))
    best = math.inf
    sync = torch.cuda.synchronize if any(d.type == "cuda" for d in devices) else (lambda: None)
    for r in range(repeats):
        gens = {d: torch.Generator(device=d).manual_seed(trial_seed(seed, r + 1)) for d in devices}
        sync()
        t = clock()
        for func, args, kwargs, pre, out, dev in plan:
            gen = gens[dev]
            if pre is not None:
                func(pre, *args, generator=gen, **kwargs)
            elif out is not None:
                func(*args, generator=gen, out=out, **kwargs)
            else:
                drawn = func(*args, generator=gen, **kwargs)
                numbers += drawn.numel() if r == 0 else 0
        sync()
        best = min(best, clock() - t)
    return best, len(plan), numbers, devices


def _rate(result: dict) -> float:
    return result["trials_played"] / max(result["trials_wall_s"], 1e-9)


def identity(a: dict, b: dict) -> str:
    """'bitwise' when the trials both played have equal bits and scores, else the largest gap."""
    common = min(len(a["rows"]), len(b["rows"]))
    ra, rb = a["rows"][:common], b["rows"][:common]
    if [r[:2] for r in ra] != [r[:2] for r in rb]:
        return "DIFFERENT TRIALS"
    if ra == rb:
        return f"bitwise ({common})"
    gap = max(abs(x[2] - y[2]) for x, y in zip(ra, rb))
    scale = float(np.median([abs(x[2]) for x in ra])) or 1.0
    return f"max |Δ| {gap:.2e} ({gap / scale:.1e} rel.)"


def table(rows: list[Row], reference: dict[str, float]) -> str:
    lines = ["| row | batch | trials | seconds | trials/s | speedup vs batch=1 | identity vs batch=1 "
             "| draw floor ms/trial (calls, numbers) | trial cost / floor | fit alone ms/trial (/ floor) |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for row in rows:
        b = row.results.get("batched")
        if b is None:
            lines.append(f"| {row.label} | – | – | – | – | – | {row.results.get('skipped', 'failed')} |")
            continue
        one = row.results.get("one")
        base = _rate(one) if one else reference.get(row.spec.target + "/" + row.spec.attack + "/" + row.spec.dataset)
        speed = f"{_rate(b) / base:.1f}×" if base else "–"
        ident = identity(b, one) if one else "–"
        floor = row.results.get("floor")
        fl = f"{floor[0] * 1e3:.2f} ({floor[1]}, {floor[2]:.2e})" if floor else "–"
        ratio = f"{(1 / _rate(b)) / floor[0]:.1f}×" if floor else "–"
        lines.append(f"| {row.label} | {b['batch']} | {b['trials_played']} | {b['trials_wall_s']:.2f} | "
                     f"{_rate(b):.1f} | {speed} | {ident} | {fl} | {ratio} | "
                     + (f"{floor[3] * 1e3:.2f} ({floor[3] / floor[0]:.1f}×) |" if floor else "– |"))
        if one:
            ratio = f"{(1 / _rate(one)) / floor[0]:.1f}×" if floor else "–"
            lines.append(f"| {row.label} | 1 | {one['trials_played']} | {one['trials_wall_s']:.2f} | "
                         f"{_rate(one):.1f} | 1.0× | | | {ratio} | |")
    return "\n".join(lines)


def rows_for(dataset: str, args: argparse.Namespace, device: str = "cpu") -> list[Row]:
    common = dict(dataset=dataset, canary=args.canary, seed=args.seed, epsilon=1.0, batch=args.batch, device=device)
    if device != "cpu":
        dataset = f"{dataset} [{device}]"
    out = [
        Row(f"{dataset} gaussian / mechanism-lrt",
            AuditSpec(target="gaussian", attack="mechanism-lrt", **common), args.trials, args.trials_one),
        Row(f"{dataset} caribou / mechanism-lrt",
            AuditSpec(target="caribou", attack="mechanism-lrt", **common), args.trials, args.trials_one),
        Row(f"{dataset} gap / mechanism-lrt",
            AuditSpec(target="gap", attack="mechanism-lrt", **common), args.trials, args.trials_one),
        Row(f"{dataset} gcon / mechanism-lrt (objective perturbation solved per trial)",
            AuditSpec(target="gcon", attack="mechanism-lrt", **common), args.trials, args.trials_one),
        Row(f"{dataset} dpdgc / mechanism-lrt (DP-Emb trained per trial)",
            AuditSpec(target="dpdgc", attack="mechanism-lrt", **common), args.full_trials, args.full_trials_one),
        Row(f"{dataset} heterpoisson / gradient-lrt (trace: DP-SGD trained per trial)",
            AuditSpec(target="heterpoisson", attack="gradient-lrt", **{**common, "canary": "dirac-gradient"}),
            args.full_trials, args.full_trials_one),
        Row(f"{dataset} gap full training / linkteller (api)",
            AuditSpec(target="gap", attack="linkteller", level="api", **common), args.full_trials,
            args.full_trials_one),
        Row(f"{dataset} caribou full training / linkteller (api)",
            AuditSpec(target="caribou", attack="linkteller", level="api", **common), args.full_trials,
            args.full_trials_one),
        Row(f"{dataset} gcn full training / linkteller (api)",
            AuditSpec(target="gcn", attack="linkteller", level="api", **common), args.full_trials,
            args.full_trials_one),
    ]
    if not args.no_backends and device == "cpu":
        caribou = AuditSpec(target="caribou", attack="mechanism-lrt", **common)
        for jobs in (1, 2):
            out.append(Row(f"{dataset} caribou, loky {jobs} job(s)", caribou, args.trials, 0, jobs=jobs, floor=False))
        for workers in (1, 2):
            out.append(Row(f"{dataset} caribou, dask LocalCluster {workers} worker(s)", caribou, args.trials, 0,
                           jobs=workers, backend="dask", workers=workers, floor=False))
    if device == "cuda" and not torch.cuda.is_available():
        for row in out:
            row.results["skipped"] = "skipped: no CUDA device"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="cora,csbm", help="comma-separated datasets (default: cora,csbm)")
    p.add_argument("--trials", type=int, default=128, help="trials of each batched run")
    p.add_argument("--trials-one", type=int, default=0, help="trials of each batch=1 run (0: as many as --trials; "
                   "fewer trials means fewer per chunk, so the per-chunk setup weighs more on batch=1)")
    p.add_argument("--full-trials", type=int, default=16, help="trials of the full-training runs (GAP, CARIBOU and GCN api, DPDGC, HeterPoisson)")
    p.add_argument("--full-trials-one", type=int, default=0, help="batch=1 trials of the full-training runs "
                   "(0: as many)")
    p.add_argument("--batch", type=int, default=0, help="batch size of the batched runs (0 = auto)")
    p.add_argument("--canary", default="random-edge", help="canary (default random-edge: no search, so the "
                   "setup stays short; the trials' cost does not depend on it)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default=None, help="comma-separated substrings: run only rows whose label has one")
    p.add_argument("--no-backends", action="store_true", help="skip the loky/Dask rows")
    p.add_argument("--threads", type=int, default=1, help="torch threads in this process (default 1)")
    p.add_argument("--devices", default="cpu,cuda", help="comma-separated devices; every row on each "
                   "(cuda rows are skipped without a GPU; default cpu,cuda)")
    args = p.parse_args(argv)
    args.trials_one = args.trials_one or args.trials
    args.full_trials_one = args.full_trials_one or args.full_trials
    torch.set_num_threads(args.threads)
    os.environ.setdefault("AUDIT_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "datasets"))

    rows: list[Row] = []
    for dataset in [d.strip() for d in args.dataset.split(",") if d.strip()]:
        for device in [d.strip() for d in args.devices.split(",") if d.strip()]:
            rows += rows_for(dataset, args, device)
    if args.only:
        keys = [k.strip() for k in args.only.split(",")]
        rows = [r for r in rows if any(k in r.label for k in keys)]
    t0 = time.time()
    reference: dict[str, float] = {}
    for row in rows:
        if "skipped" in row.results:
            print(f"{row.label}: {row.results['skipped']}", file=sys.stderr)
            continue
        t = time.time()
        try:
            run_row(row)
        except Exception as err:  # one failing row must not hide the others
            row.results.clear()
            row.results["skipped"] = f"failed: {type(err).__name__}: {err}"[:200]
        else:
            one = row.results.get("one")
            if one:
                key = row.spec.target + "/" + row.spec.attack + "/" + row.spec.dataset
                reference.setdefault(key, _rate(one))
        print(f"{row.label}: {time.time() - t:.1f} s", file=sys.stderr)
    print(table(rows, reference))
    print(f"\n(total {time.time() - t0:.0f} s; trials/s over the trials phase; backend rows compare with "
          f"the batch=1 row of the same target; torch threads {args.threads}; "
          f"cpu cores {os.cpu_count()}, cuda {'yes' if torch.cuda.is_available() else 'no'})")
    bad = [r.label for r in rows if "one" in r.results and not identity(r.results["batched"], r.results["one"])
           .startswith("bitwise")]
    if bad:
        print("not bitwise identical: " + ", ".join(bad))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
