"""Time every target's default run: ``python -m audit run --target T`` with no other flag (a fresh
results folder each, so nothing is read from an earlier run).

Per target: wall time, CPU time (user + sys of the run's process tree, from ``/usr/bin/time -v``),
peak memory, the load average before and after (the machine may be shared: CPU time is the steadier
figure), the trials the run played and its verdict (from ``--json``).

    nice -n 10 python benchmarks/default_runs.py > benchmarks/default_runs.md

Not a test: timings depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = ("gaussian", "gap", "caribou", "dpdgc", "edgerand", "lapgraph", "gcon", "gcn", "dpsgd-gcn", "heterpoisson")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _field(text: str, name: str) -> str:
    m = re.search(rf"{re.escape(name)}: (.+)", text)
    return m.group(1).strip() if m else "?"


def _wall_s(text: str) -> float:
    parts = [float(p) for p in _field(text, "Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    return sum(p * 60 ** k for k, p in enumerate(reversed(parts)))


def time_run(target: str, out: Path) -> dict:
    cmd = [sys.executable, "-m", "audit", "run", "--target", target, "--out", str(out), "--no-progress", "--json"]
    before = _load()
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    err = proc.stderr
    row = {"target": target, "status": proc.returncode, "load_before": before, "load_after": _load(),
           "wall_s": _wall_s(err), "user_s": float(_field(err, "User time (seconds)")),
           "sys_s": float(_field(err, "System time (seconds)")),
           "peak_mb": int(_field(err, "Maximum resident set size (kbytes)")) / 1024}
    try:
        result = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        result = {}
    row["trials"] = result.get("trials_played", result.get("trials"))
    row["verdict"] = result.get("verdict", (err.strip().splitlines() or ["?"])[-1] if proc.returncode else "?")
    row["eps_lb"] = result.get("eps_lb")
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--targets", nargs="*", default=list(TARGETS))
    p.add_argument("--jsonl", default=None, help="also append each row here as it is measured")
    args = p.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
    print(f"`python -m audit run --target T --out FRESH --no-progress --json` at {commit}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores\n")
    print("| target | wall s | CPU s (user + sys) | CPU ≤ 60 s | peak MB | load before → after | trials | verdict | ε_lb |")
    print("|---|---:|---:|---|---:|---|---:|---|---:|")
    with tempfile.TemporaryDirectory(prefix="default-runs-") as tmp:
        for target in args.targets:
            r = time_run(target, Path(tmp) / target)
            cpu = r["user_s"] + r["sys_s"]
            eps = f"{r['eps_lb']:.3g}" if isinstance(r["eps_lb"], (int, float)) else "?"
            print(f"| {target} | {r['wall_s']:.1f} | {cpu:.1f} ({r['user_s']:.1f} + {r['sys_s']:.1f}) | "
                  f"{'yes' if cpu <= 60 else 'no'} | {r['peak_mb']:.0f} | {r['load_before']} → {r['load_after']} | "
                  f"{r['trials']} | {r['verdict']} | {eps} |", flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
