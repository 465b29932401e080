"""Every registered target × its default attack on a device, compared with the CPU.

For each target, one short audit (``run_audit``, default canary and attack, ``--trials`` trials,
the same seed) runs with ``device="cpu"`` and with ``--device``; the two runs must play the same
trials (the same secret bits) with scores that agree within the tolerance:

    |score_dev − score_cpu| ≤ atol + rtol · median |score_cpu|     (default rtol 1e-3, atol 1e-6)

Floating-point kernels differ between devices (summation order, fused ops), so the scores are
not bitwise equal on CUDA; a difference above the tolerance is a device bug. With
``--device cpu`` both runs are CPU runs: the check is then that a rerun is bitwise equal (0 gap),
which exercises the same code on a machine without a GPU.

    python benchmarks/device_check.py --device cuda --trials 32
    python benchmarks/device_check.py --device cpu --only gaussian,gap

Prints a markdown table (target, attack, trials, seconds per device, largest gap, verdict);
exit status 1 when a target fails or exceeds the tolerance. Not a test.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.play.game import AuditSpec, run_audit  # noqa: E402
from audit.records.store import Store  # noqa: E402
from targets import base  # noqa: E402


def play(target: str, device: str, trials: int, seed: int) -> tuple[dict, list[tuple[int, int, float]], float]:
    with tempfile.TemporaryDirectory(prefix=f"device-check-{device}-") as out:
        t = time.perf_counter()
        result = run_audit(AuditSpec(target=target, trials=trials, seed=seed, device=device), out=out,
                           progress=False).to_dict()
        seconds = time.perf_counter() - t
        with Store(result["store"]) as s:
            rows = s.trials(result["key"])
    return result, rows, seconds


def compare(cpu: list[tuple[int, int, float]], dev: list[tuple[int, int, float]], rtol: float, atol: float
            ) -> tuple[float, bool, str]:
    """(largest |Δscore|, within tolerance, note)."""
    if [r[:2] for r in cpu] != [r[:2] for r in dev]:
        return float("inf"), False, "different trials (bits or indices)"
    a = np.array([r[2] for r in cpu])
    b = np.array([r[2] for r in dev])
    gap = float(np.max(np.abs(a - b))) if a.size else 0.0
    bound = atol + rtol * float(np.median(np.abs(a))) if a.size else atol
    return gap, gap <= bound, f"bound {bound:.2e}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="device to compare with the CPU (default cuda)")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--only", default=None, help="comma-separated target names")
    args = p.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"device_check: {args.device} requested but no CUDA device is present", file=sys.stderr)
        return 2
    names = sorted(base.available()) if args.only is None else [n.strip() for n in args.only.split(",")]
    lines = [f"device check: {args.device} vs cpu, {args.trials} trials each, seed {args.seed}, "
             f"tolerance |Δ| ≤ {args.atol:g} + {args.rtol:g}·median|score|",
             "", "| target | attack | level | trials | cpu s | device s | largest |Δscore| | verdict |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    failed = 0
    for name in names:
        try:
            r_cpu, cpu, s_cpu = play(name, "cpu", args.trials, args.seed)
            r_dev, dev, s_dev = play(name, args.device, args.trials, args.seed)
            gap, ok, note = compare(cpu, dev, args.rtol, args.atol)
            verdict = f"{'ok' if ok else 'OVER TOLERANCE'} ({note})"
            lines.append(f"| {name} | {r_cpu['attack']} | {r_cpu['level']} | {len(cpu)} | {s_cpu:.1f} | "
                         f"{s_dev:.1f} | {gap:.2e} | {verdict} |")
            failed += not ok
        except Exception as err:  # one failing target must not hide the others
            lines.append(f"| {name} | – | – | – | – | – | – | FAILED: {type(err).__name__}: {str(err)[:120]} |")
            failed += 1
        print(lines[-1], file=sys.stderr, flush=True)
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
