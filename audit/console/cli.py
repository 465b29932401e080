"""Command line: ``python -m audit <command>`` (also installed as ``dpgnn-audit``)."""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from attacks import base as attacks
from attacks.base import auto_attacks
from attacks.base import make as make_attack
from attacks.gmia import run_gmia
from attacks.linkteller import run_linkteller
from audit.plan import campaign, catalogue, portfolio, regress_auto
from audit.play import data, trial_sizing
from audit.stats import estimators
from audit.records import run_report
from audit.records import log as audit_log
from audit.plan.budget import BudgetError, parse
from audit.records.campaign_report import write_campaign_report
from audit.play.data import DatasetError
from audit.console.exit_status import ExitCode, is_usage_error, report_internal
from audit.play.game import AuditSpec, run_audit, setup_run
from audit.play.trial_sizing import auto_trials
from audit.play.private_fit import fit_accuracy
from audit.records.result import number, readable_name
from audit.play.run_spec import preprocessed
from canaries import base as canaries
from canaries import sensitivity
from graphs.datasets import load
from targets import base
from targets.base import LEVELS, build, one_torch_thread, parse_assignments

class UserError(Exception):
    """A mistake in the command line or its inputs: printed without a traceback, exit status 2."""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"epsilon must be a finite number > 0, got {text}")
    return value


def _delta(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"--delta must be in [0, 1) (0: a pure ε-DP claim) or 'auto', got {text}")
    return value


def _confidence(text: str) -> float:
    value = float(text)
    if not 0.5 <= value < 1:
        raise argparse.ArgumentTypeError(f"confidence must be in [0.5, 1), got {text}")
    return value


def _add_target_args(p: argparse.ArgumentParser, *, epsilon_default: float | None = 1.0) -> None:
    p.add_argument("--target", required=True, help="registry name or package.module:Class")
    p.add_argument("--epsilon", type=_positive_float, default=epsilon_default, help="target ε (default 1)")
    p.add_argument("--delta", type=_delta, default=None, help="δ in [0, 1) (0: pure ε-DP) or 'auto' (the paper's rule)")
    p.add_argument("--set", nargs="+", action="append", default=[], metavar="KEY=VALUE",
                   help="target hyperparameters, e.g. --set hops=10 contraction=0.8")
    p.add_argument("--bug", default=None, help="a planted bug of the target (see `list`)")
    p.add_argument("--dataset", default="csbm")
    p.add_argument("--data-root", default=None, help="folder laid out like shared/datasets (else $AUDIT_DATA_DIR)")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _params(args: argparse.Namespace) -> dict[str, str]:
    return parse_assignments([item for group in args.set for item in group])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpgnn-audit", description="Audit the privacy claims of DP graph neural networks.")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    parser.add_argument("-q", "--quiet", action="store_true", help="notices off: warnings and errors only")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug records too")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="play the audit game and compare the ε lower bound with the claim")
    _add_target_args(p)
    p.add_argument("--attack", default="auto", help="an attack, a comma-separated list, or auto")
    p.add_argument("--canary", default="auto")
    p.add_argument("--level", default="auto", choices=["auto", *LEVELS])
    p.add_argument("--mode", default="multi", choices=["multi", "one-run"])
    p.add_argument("--trials", default="auto",
                   help="trials of one named audit (even, >= 8), or auto: with --attack/--canary auto the "
                        "portfolio within --budget; else enough for a perfect attack to certify 1.5x the claim, "
                        "capped at 20,000 mechanism-level / 4,000 training trials (one-run: 1,000 canaries)")
    p.add_argument("--budget", default=None,
                   help="the portfolio's budget, pilots included: a trial count (2000), work units of the "
                        "target's declared trial costs (120u; the default, the same trials on any machine) or a "
                        "duration (90s, 5m, 1h)")
    p.add_argument("--confidence", type=_confidence, default=0.95)
    p.add_argument("--estimator", default="auto", choices=["auto", "cp", "gdp", "bayes", "fdp"])
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--backend", default="loky", choices=["loky", "dask"])
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (with --backend dask)")
    p.add_argument("--batch", type=int, default=0,
                   help="trials per vectorised fit (0 = auto: 64 where the target vectorises, else 1; 1 = one fit per trial)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--fresh", action="store_true",
                   help="ignore trials stored by an earlier run of the same options and code (replay them)")
    p.add_argument("--fail-on-violation", action="store_true", help="exit status 1 on VIOLATION")
    p.add_argument("--sequential", action="store_true",
                   help="stop as soon as the verdict is settled: looks at growing numbers of trials, the "
                        "confidence spent across them; --trials is then the most it plays")

    p = sub.add_parser("accounting", help="the claim and the calibrated noise, no training")
    _add_target_args(p)

    p = sub.add_parser("train", help="utility (accuracy) of one private run")
    _add_target_args(p)
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("estimate", help="ε lower bound from two score files (one number a line)")
    p.add_argument("--scores-out", required=True)
    p.add_argument("--scores-in", required=True)
    p.add_argument("--delta", type=_delta, required=True)
    p.add_argument("--method", default="cp", choices=["cp", "gdp", "bayes", "one-run"])
    p.add_argument("--confidence", type=_confidence, default=0.95)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("list", help="targets, bugs, attacks, canaries, datasets; --target T: T's config keys")
    p.add_argument("--target", default=None, help="list this target's config keys (--set KEY=VALUE)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("report", help="markdown and plots for a result")
    p.add_argument("run", help="result JSON path or run id")
    p.add_argument("--out", default=None, help="folder for the report (default: beside the result)")

    p = sub.add_parser("regress", help="the bug catalogue: every planted bug caught, every correct config consistent")
    p.add_argument("--quick", action="store_true", help="only the cheap entries (CI)")
    p.add_argument("--target", default=None)
    p.add_argument("--jobs", type=int, default=1,
                   help="with --auto: entries side by side, one per process; else each entry's trials in parallel")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="results folder (default: a temporary one)")
    p.add_argument("--no-sequential", action="store_true",
                   help="play every entry's whole trial budget (default: sequential, each entry stops as soon "
                        "as its verdict is settled; one-run entries always play their budget)")
    p.add_argument("--auto", action="store_true",
                   help="each entry's configuration (target, --set, dataset, ε, bug) by the default command: the "
                        "portfolio chooses attack, canary, estimator and trials within --budget")
    p.add_argument("--budget", default=None, help="with --auto: each entry's budget (trials, work units or a duration; default 120u)")
    p.add_argument("--tolerate-false-alarms", action="store_true",
                   help="with --auto: exit 0 although a correct configuration reads VIOLATION (printed and counted; "
                        "at one seed a size event, up to 1 - confidence on a pair whose exact ε equals the claim); "
                        "errors and missed planted bugs still fail")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("attack", help="a stand-alone attack with its own metrics (AUC, TPR at low FPR)")
    p.add_argument("name", choices=["linkteller", "gmia"])
    _add_target_args(p)
    p.add_argument("--pairs", type=int, default=500, help="linkteller: edges (and as many non-edges) to score")
    p.add_argument("--drop-isolated", action="store_true", help="gmia: drop isolated nodes first (CARIBOU)")
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("sensitivity", help="measured vs claimed sensitivity of every noisy step over searched "
                       "graphs, features and canaries; saves the worst pair as a witness; exit status 0 every "
                       "step probed and at or below its claim, 1 a step above its claim, 3 not probed")
    _add_target_args(p)
    p.add_argument("--candidates", type=int, default=32, help="canaries tried on the given graph per kind")
    p.add_argument("--max-nodes", type=int, default=5, help="every graph up to this many nodes (≤ 7)")
    p.add_argument("--no-families", action="store_true", help="skip the structured families")
    p.add_argument("--tight-canary", action="store_true",
                   help="also measure the target's own tight pair (its paper's worst case, Target.tight_pair), "
                        "where it has one")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="folder for the witness files (default results/sensitivity/<target>)")

    p = sub.add_parser("compare", help="a table of several results")
    p.add_argument("runs", nargs="+")

    _add_campaign_parser(sub)
    for command in sub.choices.values():  # --debug, --quiet, --verbose after the command too (``run ... --debug``)
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="print the traceback of an error")
        command.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                             help="notices off: warnings and errors only")
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="debug records too")
    return parser


# ---------------------------------------------------------------------------------------------
def _emit(obj: Any, as_json: bool, text: str) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str) if as_json else text)


def cmd_run(args: argparse.Namespace) -> ExitCode:
    if args.jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {args.jobs}")
    if args.batch < 0:
        raise UserError(f"--batch must be >= 0 (0 = auto), got {args.batch}")
    auto = args.trials == "auto"
    if _portfolio_run(args):
        return _cmd_portfolio(args)
    if args.budget is not None:
        raise UserError("--budget is the portfolio's (--attack auto --canary auto --level auto --trials auto); "
                        "a named audit takes --trials")
    if not auto:
        try:
            trials = int(args.trials)
        except ValueError:
            raise UserError(f"--trials must be an even number >= 8 or auto, got {args.trials!r}") from None
    spec = AuditSpec(target=args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug,
                     params=_params(args), dataset=args.dataset, canary=args.canary, attack=args.attack,
                     level=args.level, trials=trial_sizing.NAMED_RUN_DEFAULT if auto else trials, seed=args.seed,
                     confidence=args.confidence, estimator=args.estimator, mode=args.mode, device=args.device,
                     data_root=args.data_root, batch=args.batch)
    attacks = [a.strip() for a in args.attack.split(",")]
    with one_torch_thread():  # as run_audit would build it: every run below plays on this setup
        setup = setup_run(spec)
    if attacks == ["auto"]:
        attacks = auto_attacks(setup.target, setup.graph)
    specs = []
    for a in attacks:
        one = replace(spec, attack=a)
        if auto and spec.mode == "multi":
            level = make_attack(a).levels[0] if spec.level == "auto" else spec.level
            n, note = auto_trials(setup.claim, level, spec.confidence)
            print(f"{a}: {note}", file=sys.stderr)
            one = replace(one, trials=n)
        specs.append(one)
    results = [run_audit(one, out=args.out, jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                         progress=not args.no_progress, fresh=args.fresh, sequential=args.sequential,
                         setup=setup)
               for one in specs]
    text = "\n\n".join(run_report.table(r) + f"\n\nresult: {Path(args.out) / (r.run_id + '.json')}" for r in results)
    records = [r.to_dict() for r in results]
    _emit(records[0] if len(records) == 1 else records, args.json, text)
    violated = any(r.verdict == "VIOLATION" for r in results)
    return ExitCode.VIOLATION if args.fail_on_violation and violated else ExitCode.OK


def _portfolio_run(args: argparse.Namespace) -> bool:
    """The default run plays the portfolio: nothing named, no trial count pinned, multi-run mode."""
    return (args.attack, args.canary, args.level, args.trials, args.mode) == ("auto", "auto", "auto", "auto", "multi")


def _budget(text: str | None) -> Any:
    try:
        return portfolio.DEFAULT_BUDGET if text is None else parse(text)
    except BudgetError as err:
        raise UserError(f"--budget: {err}") from None


def _cmd_portfolio(args: argparse.Namespace) -> ExitCode:
    if args.jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {args.jobs}")
    budget = _budget(args.budget)
    spec = AuditSpec(target=args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug, params=_params(args),
                     dataset=args.dataset, seed=args.seed, confidence=args.confidence, estimator=args.estimator,
                     device=args.device, data_root=args.data_root, batch=args.batch)
    result = portfolio.run(spec, budget, out=args.out, jobs=args.jobs, progress=not args.no_progress,
                           fresh=args.fresh)
    text = (run_report.table(result) + "\n\n" + portfolio.render(result.extra["portfolio"])
            + f"\n\nresult: {Path(args.out) / (result.run_id + '.json')}")
    _emit(result.to_dict(), args.json, text)
    return ExitCode.VIOLATION if args.fail_on_violation and result.verdict == "VIOLATION" else ExitCode.OK


def cmd_accounting(args: argparse.Namespace) -> ExitCode:
    target = build(args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug, device=args.device,
                   **_params(args))
    graph = preprocessed(target, data.load(args.dataset, root=args.data_root))
    claim = target.claim(graph).to_dict()
    claim["target"] = args.target
    claim["dataset"] = args.dataset
    lines = [f"target      {args.target} on {args.dataset}",
             f"claim       ε = {claim['epsilon']:.6g}, δ = {claim['delta']:.3g}  ({claim['accountant']})",
             f"unit        {claim['unit']}"]
    if claim.get("gdp_mu") is not None:
        lines.append(f"μ (GDP)     {claim['gdp_mu']:.6g}")
    lines += [f"{k:<11} {v}" for k, v in claim["details"].items()]
    _emit(claim, args.json, "\n".join(lines))
    return ExitCode.OK


def cmd_train(args: argparse.Namespace) -> ExitCode:
    target = build(args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug, device=args.device,
                   **_params(args))
    fitted = fit_accuracy(target, args.dataset, root=args.data_root, seed=args.seed)
    claim, acc = fitted.claim, fitted.accuracy
    if acc is None:
        raise UserError(f"target {args.target!r} reports no accuracy (it is not a classifier)")
    out = {"target": args.target, "dataset": args.dataset, "epsilon": claim.epsilon, "delta": claim.delta,
           "accuracy": acc, "seed": args.seed, "wall_time_s": fitted.seconds}
    text = (f"{args.target} on {args.dataset}, ε = {claim.epsilon:.4g}, δ = {claim.delta:.3g}: "
            + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()) + f"  ({out['wall_time_s']:.1f}s)")
    _emit(out, args.json, text)
    return ExitCode.OK


def _read_scores(path: str) -> list[float]:
    p = Path(path)
    if not p.exists():
        raise UserError(f"score file not found: {path}")
    values = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            values.append(float(line))
        except ValueError:
            raise UserError(f"{path}, line {n}: not a number: {line!r}") from None
    if not values:
        raise UserError(f"{path} holds no scores")
    return values


def cmd_estimate(args: argparse.Namespace) -> ExitCode:
    out, inn = _read_scores(args.scores_out), _read_scores(args.scores_in)
    if args.delta is None:
        raise UserError("--delta needs a value in [0, 1) (0: a pure ε-DP claim)")
    est = estimators.estimate(out, inn, delta=args.delta, method=args.method, confidence=args.confidence)
    d = est.to_dict()
    d["auc"] = estimators.auc(out, inn)
    text = (f"ε lower bound {d['eps_lb']} ({est.method}, one-sided {est.confidence:.0%}); "
            f"two-sided {est.confidence:.0%} interval {d['interval']}; "
            f"max certifiable {d['max_certifiable_eps']}; AUC {d['auc']:.4f}; counts {est.counts}"
            + (f"\nassumes: {est.assumption}" if est.assumption else ""))
    _emit(d, args.json, text)
    return ExitCode.OK


def cmd_list(args: argparse.Namespace) -> ExitCode:
    if args.target:
        return _list_target(args.target, args.json)

    info: dict[str, Any] = {"targets": {}, "attacks": attacks.available(), "canaries": canaries.available(),
                            "datasets": data.names(), "estimators": list(estimators.METHODS)}
    for name in base.available():
        cls = base.get(name)
        info["targets"][name] = {"levels": list(cls.levels), "bugs": dict(cls.bugs)}
    lines = ["targets:"]
    for name, t in info["targets"].items():
        lines.append(f"  {name:<13} views: {', '.join(t['levels'])}")
        for bug, what in t["bugs"].items():
            lines.append(f"      --bug {bug:<24} {what}")
    lines += [f"attacks:    {', '.join(info['attacks'])}",
              f"canaries:   {', '.join(info['canaries'])}, edge:U-V (one named edge)",
              f"estimators: {', '.join(info['estimators'])}", f"datasets:   {', '.join(info['datasets'])}"]
    _emit(info, args.json, "\n".join(lines))
    return ExitCode.OK


def _list_target(name: str, as_json: bool) -> ExitCode:
    cls = base.get(name)
    rows = base.config_help(cls.Config)
    width = max(len(r["key"]) for r in rows)
    lines = [f"{name}: views {', '.join(cls.levels)}; --set KEY=VALUE for any key below", ""]
    lines += [f"  {r['key']:<{width}}  {r['default']:<12} {r['type']:<18} {r['meaning']}" for r in rows]
    if cls.bugs:
        lines += ["", "planted bugs (--bug NAME):"] + [f"  {b:<26} {what}" for b, what in cls.bugs.items()]
    _emit({"target": name, "levels": list(cls.levels), "config": rows, "bugs": dict(cls.bugs)}, as_json,
          "\n".join(lines))
    return ExitCode.OK


def cmd_report(args: argparse.Namespace) -> ExitCode:
    try:
        result = run_report.load_result(args.run)
    except (FileNotFoundError, run_report.NotAResult) as err:
        raise UserError(str(err)) from None
    folder = Path(args.out) if args.out else Path(result.store).parent
    folder.mkdir(parents=True, exist_ok=True)
    run_id = result.run_id or "run"
    scores = None
    if result.store and Path(result.store).exists():
        try:
            scores = run_report.scores_of(result)
        except Exception as err:  # noqa: BLE001 - an unreadable store: the table still stands
            print(f"note: cannot read its trials from {result.store} ({err})", file=sys.stderr)
    if scores is not None and not (scores[0].size and scores[1].size):
        scores = None
    md = folder / f"{run_id}.md"
    if scores is None:  # a result without its store (a clean clone): the table, no plot
        print(f"note: no plot: the store {result.store} holds no trials of this run (its scores are not "
              "kept in the result JSON)", file=sys.stderr)
        md.write_text(run_report.markdown(result))
        print(run_report.table(result))
        print(f"\nreport: {md}")
        return ExitCode.OK
    image = run_report.plot(result, folder / f"{run_id}.png")
    md.write_text(run_report.markdown(result, image.name))
    print(run_report.table(result, scores))
    print(f"\nreport: {md}\nplot:   {image}")
    return ExitCode.OK


def cmd_compare(args: argparse.Namespace) -> ExitCode:
    results = []
    for r in args.runs:
        try:
            results.append(run_report.load_result(r))
        except run_report.NotAResult as err:  # campaign.json, utility.json, ...: not a run
            print(f"note: skipped {err}", file=sys.stderr)
        except FileNotFoundError as err:
            raise UserError(str(err)) from None
    if not results:
        raise UserError("no result JSON among the files given")
    print(run_report.compare(results))
    return ExitCode.OK


def cmd_regress(args: argparse.Namespace) -> ExitCode:
    todo = catalogue.entries(quick=args.quick, target=args.target)
    if not todo:
        raise UserError(f"no catalogue entry for target {args.target!r}")
    if args.auto:
        return _regress_auto(args, todo)
    rows, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="dpgnn-regress-") as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        print("| entry | expected | got | ε_lb | claimed ε | method | trials | of | stop | s |", flush=True)
        print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
        for entry in todo:
            start = time.time()
            try:
                result = run_audit(entry.spec(args.seed), out=out, jobs=args.jobs, progress=False,
                                   sequential=not args.no_sequential)
            except Exception as err:  # noqa: BLE001 -- an entry that errors fails the catalogue, the rest still run
                failed += 1
                rows.append({"entry": entry.name, "expected": entry.expect, "got": "ERROR", "ok": False,
                             "error": f"{type(err).__name__}: {err}", "seconds": time.time() - start,
                             "trials": 0, "budget": entry.trials})
                print(f"| {entry.name} | {entry.expect} | ERROR  ← {rows[-1]['error']} | - | - | - | - | "
                      f"{entry.trials} | - | {rows[-1]['seconds']:.0f} |", flush=True)
                continue
            ok = result.verdict == entry.expect
            failed += not ok
            seq = result.sequential or {"on": False}
            row = {"entry": entry.name, "expected": entry.expect, "got": result.verdict, "ok": ok,
                   "eps_lb": result.eps_lb, "claimed_epsilon": result.claimed_epsilon,
                   "method": result.method, "trials": result.trials, "budget": entry.trials,
                   "sequential": seq["on"], "stop": seq.get("reason", "fixed budget"), "seconds": time.time() - start}
            rows.append(row)
            mark = "" if ok else "  ← MISMATCH"
            eps_lb = row["eps_lb"] if isinstance(row["eps_lb"], str) else f"{row['eps_lb']:.3f}"
            stop = f"look {seq['stopped_at_look']}: {seq['stop']}" if seq["on"] else "fixed"
            print(f"| {entry.name} | {entry.expect} | {row['got']}{mark} | {eps_lb} | "
                  f"{row['claimed_epsilon']:.3g} | {row['method']} | {row['trials']} | {entry.trials} | {stop} | "
                  f"{row['seconds']:.0f} |", flush=True)
    gaps = {k: v for k, v in catalogue.NOT_YET_CAUGHT.items() if args.target in (None, k[0])}
    errors = sum("error" in r for r in rows)
    print(f"\n{len(rows) - failed}/{len(rows)} as expected; {failed - errors} mismatch(es) (missed bug or false "
          f"alarm); {errors} error(s). "
          f"{sum(r['trials'] for r in rows):,} trials played of {sum(r['budget'] for r in rows):,} budgeted"
          + (" (sequential)." if not args.no_sequential else "."))
    if gaps:
        print("Planted bugs no attack of this version catches yet:")
        for (t, bug), why in gaps.items():
            print(f"  {t} --bug {bug}: {why}")
    if args.json:
        print(json.dumps({"rows": rows, "not_yet_caught": {f"{t}:{b}": w for (t, b), w in gaps.items()}}, indent=2))
    return ExitCode.VIOLATION if failed else ExitCode.OK


def _regress_auto(args: argparse.Namespace, todo: list[Any]) -> ExitCode:
    budget = _budget(args.budget)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dpgnn-regress-auto-") as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        print(regress_auto.HEADER, flush=True)
        for row in regress_auto.play_all(todo, budget, seed=args.seed, out=out, jobs=args.jobs):
            rows.append(row)
            print(regress_auto.row_text(row), flush=True)
    print("\n" + regress_auto.summary(rows))
    if args.json:
        print(json.dumps({"rows": rows}, indent=2, default=str))
    tolerate = args.tolerate_false_alarms
    return ExitCode.VIOLATION if any(regress_auto.fails(r, tolerate_false_alarms=tolerate) for r in rows) else ExitCode.OK


def cmd_attack(args: argparse.Namespace) -> ExitCode:
    target = build(args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug, device=args.device,
                   **_params(args))
    graph = data.load(args.dataset, root=args.data_root, seed=args.seed)
    if args.name == "linkteller":
        metrics = run_linkteller(target, graph, n_pairs=args.pairs, rng=args.seed)
    else:
        metrics = run_gmia(target, graph, rng=args.seed, drop_isolated=args.drop_isolated)
    metrics = {k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}
    claim = target.claim(graph)
    metrics = {"attack": args.name, "target": args.target, "dataset": args.dataset,
               "claimed_epsilon": claim.epsilon if math.isfinite(claim.epsilon) else "inf", **metrics}
    width = max(map(len, metrics))
    _emit(metrics, args.json, "\n".join(f"{k.ljust(width)}  {v:.4f}" if isinstance(v, float) else
                                         f"{k.ljust(width)}  {v}" for k, v in metrics.items()))
    return ExitCode.OK


def _add_campaign_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("campaign", help="a declared grid of audits into one results folder")
    p.add_argument("config", help="campaign TOML path, or a name in campaigns/ (e.g. default)")
    p.add_argument("--quick", action="store_true", help="the [quick] subset (CI)")
    p.add_argument("--out", default=None, help="results folder (default results/campaign-<name>[-quick]/)")
    p.add_argument("--jobs", type=int, default=1, help="parallel trial workers")
    p.add_argument("--only", default=None, metavar="TARGET", help="only this target's rows")
    p.add_argument("--report-only", action="store_true", help="regenerate README.md and plots from campaign.json")
    p.add_argument("--fresh", action="store_true",
                   help="run every row again (default: keep rows campaign.json holds with the same options and code)")
    p.add_argument("--dry-run", action="store_true", help="list the rows and their trial budgets, run nothing")
    p.add_argument("--allow-dirty", action="store_true",
                   help="run rows even though tracked files have uncommitted changes (refused by default)")
    p.add_argument("--no-progress", action="store_true")
    return p


def cmd_campaign(args: argparse.Namespace) -> ExitCode:
    if args.jobs < 1:
        raise campaign.CampaignError(f"--jobs must be >= 1, got {args.jobs}")
    plan = campaign.load(args.config, quick=args.quick, only=args.only)
    out = Path(args.out) if args.out else plan.default_out()
    if args.report_only:
        readme = write_campaign_report(out)
        print(f"regenerated {readme}")
        return ExitCode.OK
    if args.dry_run:
        for i, row in enumerate(plan.rows, 1):
            print(f"[{i}/{len(plan.rows)}] {row.label} trials={row.spec.trials} params={row.spec.params}")
        print(f"{len(plan.rows)} rows, {sum(r.spec.trials for r in plan.rows)} trials")
        return ExitCode.OK
    torch.set_num_threads(1)
    command = "python -m audit campaign " + " ".join(_argv_of(args))
    try:
        doc = campaign.run(plan, out, jobs=args.jobs, progress=not args.no_progress, command=command,
                           fresh=args.fresh, allow_dirty=args.allow_dirty)
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished rows are in {out / 'campaign.json'} and finished trials in the store; "
              "rerun the same command to resume", file=sys.stderr)
        return ExitCode.INTERRUPTED
    n_v = sum(r.get("verdict") == "VIOLATION" and math.isfinite(number(r.get("claimed_epsilon"))) for r in doc["rows"])
    n_e = sum(r.get("verdict") == "ERROR" for r in doc["rows"])
    ran = doc.get("ran_now", 0)
    session = f"{ran} run now, {len(doc['rows']) - ran} kept" if ran else "all kept from campaign.json, nothing run"
    print(f"{len(doc['rows'])} rows ({session}), {n_v} violation(s), {n_e} error(s); report: {out / 'README.md'}")
    return ExitCode.OK


def _argv_of(args: argparse.Namespace) -> list[str]:
    out = [str(args.config)]
    if args.quick:
        out.append("--quick")
    if args.out:
        out += ["--out", str(args.out)]
    if args.jobs != 1:
        out += ["--jobs", str(args.jobs)]
    if getattr(args, "fresh", False):
        out.append("--fresh")
    if getattr(args, "allow_dirty", False):
        out.append("--allow-dirty")
    if args.only:
        out += ["--only", args.only]
    return out


#: ``sensitivity``'s exit status by the probe's verdict (2 stays the command's error status)
SENSITIVITY_STATUS = {"pass": ExitCode.OK, "no witness found": ExitCode.OK, "violation": ExitCode.VIOLATION,
                      "not probed": ExitCode.NOT_PROBED}


def cmd_sensitivity(args: argparse.Namespace) -> ExitCode:
    if not 1 <= args.max_nodes <= 7:
        raise UserError(f"--max-nodes must be in 1..7, got {args.max_nodes}")
    target = build(args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug, device=args.device,
                   **_params(args))
    graph = load(args.dataset, root=args.data_root, seed=args.seed)
    out = args.out or str(Path("results") / "sensitivity" / (readable_name(args.target)
                                                            + (f"-{args.bug}" if args.bug else "")))
    found = sensitivity.probe(target, graph, candidates=args.candidates, max_nodes=args.max_nodes,
                              use_families=not args.no_families, seed=args.seed, out=out, dataset=args.dataset,
                              tight=args.tight_canary)
    _emit(found.to_dict(), args.json, sensitivity.render(found))
    return SENSITIVITY_STATUS[found.status]


COMMANDS = {"run": cmd_run, "accounting": cmd_accounting, "train": cmd_train, "estimate": cmd_estimate,
            "list": cmd_list, "report": cmd_report, "compare": cmd_compare, "regress": cmd_regress,
            "attack": cmd_attack, "campaign": cmd_campaign,
            "sensitivity": cmd_sensitivity}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quiet and args.verbose:
        print("dpgnn-audit: error: --quiet and --verbose exclude each other", file=sys.stderr)
        return ExitCode.USAGE
    audit_log.set_verbosity(quiet=args.quiet, verbose=args.verbose)
    try:
        return int(COMMANDS[args.command](args))
    except BrokenPipeError:
        return ExitCode.OK
    except KeyboardInterrupt:
        print("\ninterrupted: finished trials are saved; rerun the same command to resume", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as err:  # noqa: BLE001 -- the one place an exception becomes an exit status
        if is_usage_error(err, usage=(UserError, DatasetError, FileNotFoundError)):
            if args.debug:
                traceback.print_exception(err, file=sys.stderr)
            print(f"dpgnn-audit {args.command}: error: {err}", file=sys.stderr)
            return ExitCode.USAGE
        report_internal(args.command, err, args.debug)
        return ExitCode.INTERNAL
