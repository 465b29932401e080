"""The command line's grammar: every command, its options and their checks (:func:`build_parser`), the
reading of the parsed options into values (``--set``, ``--budget``, a score file, a campaign's argv),
and :class:`UserError`, a mistake in the command line or its inputs. :mod:`audit.console.cli` runs the
commands.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from audit.plan import portfolio
from audit.plan.budget import BudgetError, parse
from targets.base import LEVELS, parse_assignments
from audit.stats.kinds import AUTO


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
    if text == AUTO:
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


def params_of(args: argparse.Namespace) -> dict[str, str]:
    return parse_assignments([item for group in args.set for item in group])


def is_portfolio_run(args: argparse.Namespace) -> bool:
    """The default run plays the portfolio: nothing named, no trial count pinned, multi-run mode."""
    return (args.attack, args.canary, args.level, args.trials, args.mode) == ("auto", "auto", "auto", "auto", "multi")


def budget_of(text: str | None) -> Any:
    try:
        return portfolio.DEFAULT_BUDGET if text is None else parse(text)
    except BudgetError as err:
        raise UserError(f"--budget: {err}") from None


def read_scores(path: str) -> list[float]:
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


def campaign_argv(args: argparse.Namespace) -> list[str]:
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
