"""False-alarm rate of the default command (the portfolio's choice included) on correct targets.

Each seed is one ``python -m audit run --target T --budget B`` (the run seed also draws the graph,
the canaries and the pilots); a VIOLATION on a correct target is a false alarm. The rate must stay
within the binomial limit of the stated confidence: at most ``binom.ppf(0.99, seeds, 1 − confidence)``
alarms (a 99% one-sided limit for a test whose false-alarm probability is at most 1 − confidence).

    python benchmarks/portfolio_false_alarms.py --target gaussian --seeds 200 --budget 1000
    python benchmarks/portfolio_false_alarms.py --target caribou --set encoder_epochs=20 --seeds 50 --budget 600

Rows are appended to ``--rows`` (JSON lines) as they finish, so an interrupted measurement resumes;
the summary table is printed and appended to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from scipy import stats

from audit.plan import portfolio
from audit.plan.budget import parse
from audit.play.game import AuditSpec
from targets.base import parse_assignments


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--set", nargs="*", default=[])
    p.add_argument("--dataset", default="csbm")
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--from-seed", type=int, default=0,
                   help="first seed this process plays (split one measurement over processes by seed range)")
    p.add_argument("--budget", default="1000")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--rows", default=None, help="JSON-lines file of finished seeds (default beside --out)")
    p.add_argument("--out", default="benchmarks/portfolio_false_alarms.md")
    args = p.parse_args()
    params = parse_assignments(args.set)
    label = f"{args.target} ε={args.epsilon:g} {' '.join(args.set)} {args.dataset} budget {args.budget}".strip()
    rows_path = Path(args.rows or Path(args.out).with_suffix(f".{args.target}.jsonl"))
    done = {}
    if rows_path.exists():
        for line in rows_path.read_text().splitlines():
            row = json.loads(line)
            if row["label"] == label:
                done[row["seed"]] = row
    budget = parse(args.budget)
    with tempfile.TemporaryDirectory(prefix="dpgnn-false-alarms-") as tmp:
        for seed in range(args.from_seed, args.seeds):
            if seed in done:
                continue
            start = time.time()
            spec = AuditSpec(target=args.target, epsilon=args.epsilon, params=params, dataset=args.dataset, seed=seed,
                             confidence=args.confidence)
            r = portfolio.run(spec, budget, out=tmp, progress=False)
            w = r.extra["portfolio"]["winner"]
            row = {"label": label, "seed": seed, "verdict": r.verdict, "eps_lb": r.eps_lb,
                   "claimed": r.claimed_epsilon, "chosen": f"{w['attack']} / {w['canary']} @ {w['level']}",
                   "trials": r.trials, "power": (r.power or {}).get("reading"), "seconds": time.time() - start,
                   "method": r.method, **_family(r)}
            done[seed] = row
            with rows_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
    rows = [done[s] for s in sorted(done) if args.from_seed <= s < args.seeds]
    alarms = sum(r["verdict"] == "VIOLATION" for r in rows)
    limit = int(stats.binom.ppf(0.99, len(rows), 1 - args.confidence))
    chosen = Counter(r["chosen"] for r in rows).most_common(4)
    text = (f"| {label} | {len(rows)} | {alarms} ({alarms / max(len(rows), 1):.1%}) | {limit} | "
            f"{'within' if alarms <= limit else 'ABOVE'} | "
            f"{'; '.join(f'{c} ×{n}' for c, n in chosen)} | {sum(r['seconds'] for r in rows) / max(len(rows), 1):.1f} |")
    print(text)
    with open(args.out, "a") as f:
        f.write(f"{text}  <!-- {time.strftime('%Y-%m-%d %H:%M')} -->\n")


def _family(r) -> dict:
    """Where the run certified with a family fit: cp beside it, and the subsampled-Gaussian fit's σ̂ and sampler
    verdict, or the whole-node fit's share; where the winner scored an exact loss, its pair's exact ε."""
    p = r.extra.get("portfolio") or {}
    w = p.get("winner") or {}
    row = next((c for c in p.get("candidates", []) if (c.get("level"), c.get("attack"), c.get("canary")) ==
                (w.get("level"), w.get("attack"), w.get("canary"))), {})
    out = {"pair_exact_eps": row["pair_exact_eps"]} if row.get("pair_exact_eps") is not None else {}
    fam = r.extra.get("family_fit")
    if not fam:
        return out
    out.update({"family": fam.get("family", "subsampled Gaussian"), "cp_eps_lb": fam["cp"]["eps_lb"],
                "refused": fam.get("refused")})
    if "sampler" in fam:
        out.update({"sigma_hat": (r.estimate.get("counts") or {}).get("sigma_hat"), "sampler_ok": fam["sampler"]["ok"]})
    if "cp_share" in fam:
        out["cp_share"] = fam["cp_share"]
    return out


if __name__ == "__main__":
    main()
