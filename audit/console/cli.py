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
from audit.records.campaign_report import write_campaign_report
from audit.play.data import DatasetError
from audit.console.exit_status import ExitCode, is_usage_error, report_internal
from audit.console.parser import (UserError, budget_of, build_parser, campaign_argv, is_portfolio_run, params_of,
                                  read_scores)
from audit.play.game import AuditSpec, run_audit, setup_run
from audit.play.private_fit import fit_accuracy
from audit.records.result import number, readable_name
from audit.play.run_spec import preprocessed
from audit.stats.kinds import AUTO, Mode
from canaries import base as canaries, sensitivity
from graphs.datasets import load
from targets import base
from targets.base import build, one_torch_thread


# ---------------------------------------------------------------------------------------------
def _emit(obj: Any, as_json: bool, text: str) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str) if as_json else text)


def cmd_run(args: argparse.Namespace) -> ExitCode:
    if args.jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {args.jobs}")
    if args.batch < 0:
        raise UserError(f"--batch must be >= 0 (0 = auto), got {args.batch}")
    auto = args.trials == AUTO
    if is_portfolio_run(args):
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
                     params=params_of(args), dataset=args.dataset, canary=args.canary, attack=args.attack,
                     level=args.level, trials=trial_sizing.NAMED_RUN_DEFAULT if auto else trials, seed=args.seed,
                     confidence=args.confidence, estimator=args.estimator, mode=args.mode, device=args.device,
                     data_root=args.data_root, batch=args.batch)
    attacks = [a.strip() for a in args.attack.split(",")]
    with one_torch_thread():  # as run_audit would build it: every run below plays on this setup
        setup = setup_run(spec)
        attacks = auto_attacks(setup.target, setup.graph) if attacks == ["auto"] else attacks
    specs = []
    for a in attacks:
        one = replace(spec, attack=a)
        if auto and spec.mode == Mode.MULTI:
            level = make_attack(a).levels[0] if spec.level == AUTO else spec.level
            n, note = trial_sizing.auto_trials(setup.claim, level, spec.confidence)
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


def _cmd_portfolio(args: argparse.Namespace) -> ExitCode:
    if args.jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {args.jobs}")
    budget = budget_of(args.budget)
    spec = AuditSpec(target=args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug, params=params_of(args),
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
                   **params_of(args))
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
                   **params_of(args))
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


def cmd_estimate(args: argparse.Namespace) -> ExitCode:
    out, inn = read_scores(args.scores_out), read_scores(args.scores_in)
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
    budget = budget_of(args.budget)
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
                   **params_of(args))
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
    command = "python -m audit campaign " + " ".join(campaign_argv(args))
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


#: ``sensitivity``'s exit status by the probe's verdict (2 stays the command's error status)
SENSITIVITY_STATUS = {"pass": ExitCode.OK, "no witness found": ExitCode.OK, "violation": ExitCode.VIOLATION,
                      "not probed": ExitCode.NOT_PROBED}


def cmd_sensitivity(args: argparse.Namespace) -> ExitCode:
    if not 1 <= args.max_nodes <= 7:
        raise UserError(f"--max-nodes must be in 1..7, got {args.max_nodes}")
    target = build(args.target, epsilon=args.epsilon, delta=args.delta, bug=args.bug, device=args.device,
                   **params_of(args))
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
