"""Sequential audits (issue #24): what `regress --quick` pays with and without them, and the
false-alarm rate of the whole sequential `run` on the Gaussian reference.

    # (a) the catalogue: both modes one after the other (each several minutes), then the table
    nice -n 10 python -m audit regress --quick --no-sequential --json > fixed.log
    nice -n 10 python -m audit regress --quick --json > seq.log
    python benchmarks/sequential.py regress --fixed fixed.log --sequential seq.log
    # (b) false alarms of `run --sequential` on the exact Gaussian (claim = truth), in-process
    python benchmarks/sequential.py false-alarm --seeds 200 --trials 2000

`regress` without logs runs both commands itself. The logs are `regress --json` outputs (the table,
then one JSON document); a log from before `--no-sequential` existed is a fixed-budget log.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rows(log: Path) -> list[dict]:
    text = log.read_text()
    start = text.index("\n{") + 1 if not text.startswith("{") else 0
    return json.loads(text[start:])["rows"]


def regress(fixed: Path | None, seq: Path | None) -> str:
    root = Path(__file__).resolve().parents[1]
    for log, flag in ((fixed, ["--no-sequential"]), (seq, [])):
        if log is not None and not log.exists():
            with log.open("w") as f:
                subprocess.run(["nice", "-n", "10", sys.executable, "-m", "audit", "regress", "--quick", "--json",
                                *flag], cwd=root, stdout=f, check=False)
    a, b = _rows(fixed), _rows(seq)
    assert [r["entry"] for r in a] == [r["entry"] for r in b], "the two logs hold different entries"
    lines = ["| entry | expected | fixed: verdict | trials | sequential: verdict | trials | stop |",
             "|---|---|---|---:|---|---:|---|"]
    for x, y in zip(a, b):
        stop = y.get("stop", "") if y.get("sequential") else "fixed budget (one-run)"
        lines.append(f"| {x['entry']} | {x['expected']} | {x['got']} | {x['trials']:,} | {y['got']} | "
                     f"{y['trials']:,} | {stop} |")
    ta, tb = sum(r["trials"] for r in a), sum(r["trials"] for r in b)
    sa, sb = sum(r["seconds"] for r in a), sum(r["seconds"] for r in b)
    same = sum(x["got"] == y["got"] for x, y in zip(a, b))
    lines += ["", f"total trials: fixed {ta:,}, sequential {tb:,} ({tb / ta:.0%}); wall {sa:.0f} s vs {sb:.0f} s "
              f"(shared machine: indicative only)",
              f"same verdict on {same}/{len(a)} entries; as expected: fixed {sum(r['ok'] for r in a)}/{len(a)}, "
              f"sequential {sum(r['ok'] for r in b)}/{len(b)}"]
    return "\n".join(lines)


def false_alarm(seeds: int, trials: int, epsilon: float, bug: str | None) -> str:
    from audit.play.game import AuditSpec, run_audit

    rows = {}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for seq in (True, False):
            alarms, used = 0, []
            for s in range(seeds):
                r = run_audit(AuditSpec(target="gaussian", epsilon=epsilon, bug=bug, trials=trials, seed=s),
                              out=Path(tmp) / f"{seq}-{s}", progress=False, sequential=seq)
                alarms += r.verdict == "VIOLATION"
                used.append(r.trials)
            rows[seq] = (alarms, sum(used) / len(used))
    rate = {k: a / seeds for k, (a, _) in rows.items()}
    se = math.sqrt(0.05 * 0.95 / seeds)
    what = f"gaussian{'--bug ' + bug if bug else ''} ε={epsilon:g}, --trials {trials}, seeds 0..{seeds - 1}"
    return "\n".join([
        f"{what} ({time.time() - t0:.0f} s)",
        "| run | VIOLATION rate | mean trials used |", "|---|---:|---:|",
        *(f"| {'sequential' if k else 'fixed budget'} | {rows[k][0]}/{seeds} = {rate[k]:.1%} | {rows[k][1]:,.0f} |"
          for k in (True, False)),
        f"α + 2 s.e. = {0.05 + 2 * se:.1%} (s.e. of a 5% rate over {seeds} seeds: {se:.1%})"])


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("regress")
    r.add_argument("--fixed", type=Path, default=Path("regress-fixed.log"))
    r.add_argument("--sequential", type=Path, default=Path("regress-sequential.log"))
    f = sub.add_parser("false-alarm")
    f.add_argument("--seeds", type=int, default=200)
    f.add_argument("--trials", type=int, default=2000)
    f.add_argument("--epsilon", type=float, default=2.0)
    f.add_argument("--bug", default=None, help="a planted bug instead (then the rate is the power)")
    a = p.parse_args()
    print(regress(a.fixed, a.sequential) if a.what == "regress" else
          false_alarm(a.seeds, a.trials, a.epsilon, a.bug))


if __name__ == "__main__":
    main()
