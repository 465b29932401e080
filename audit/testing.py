"""Helpers for auditing a DP-GNN from pytest.

    from audit.testing import assert_private

    @pytest.mark.audit
    def test_my_trainer_is_private(tmp_path):
        assert_private("mypkg.trainer:MyDPGNN", epsilon=2.0, trials=400, out=tmp_path)

``audit_claim`` plays the game and returns the :class:`audit.records.result.Result`; ``assert_private`` fails the test
when the lower bound exceeds the claim at the stated confidence (a VIOLATION). Mark long audits
``@pytest.mark.slow``. A correct target fails such a test at most 1 − confidence of the time;
fix the seed so CI is reproducible.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from audit.play.game import AuditSpec, run_audit
from audit.records.result import Result
from targets.base import Level


def audit_claim(target: str, *, epsilon: float = 1.0, delta: float | None = None, bug: str | None = None,
                params: dict[str, Any] | None = None, dataset: str = "csbm", attack: str = "auto",
                canary: str = "auto", trials: int = 400, seed: int = 0, confidence: float = 0.95,
                estimator: str = "auto", mode: str = "multi", jobs: int = 1,
                out: str | Path | None = None) -> Result:
    """Audit `target` (a registry name or ``package.module:Class``) and return the result."""
    spec = AuditSpec(target=target, epsilon=epsilon, delta=delta, bug=bug,
                     params={k: str(v) for k, v in (params or {}).items()}, dataset=dataset, canary=canary,
                     attack=attack, trials=trials, seed=seed, confidence=confidence, estimator=estimator,
                     mode=mode)
    if out is None:
        with tempfile.TemporaryDirectory(prefix="dpgnn-audit-") as tmp:
            return run_audit(spec, out=tmp, jobs=jobs, progress=False)
    return run_audit(spec, out=out, jobs=jobs, progress=False)


def assert_private(target: str, **kwargs: Any) -> Result:
    """Audit and raise AssertionError on a VIOLATION; returns the result otherwise."""
    result = audit_claim(target, **kwargs)
    if result.verdict == "VIOLATION":
        raise AssertionError(
            f"{target}: empirical ε lower bound {result.eps_lb} exceeds the claimed ε "
            f"{result.claimed_epsilon:.4g} at {result.confidence:.0%} confidence "
            f"({result.method}, {result.trials} trials, attack {result.attack})")
    return result


def assert_violation(target: str, **kwargs: Any) -> Result:
    """The opposite check, for planted bugs: raise unless the audit reports a VIOLATION."""
    result = audit_claim(target, **kwargs)
    if result.verdict != "VIOLATION":
        raise AssertionError(f"{target} with bug {kwargs.get('bug')!r} was not caught: ε_lb {result.eps_lb} "
                             f"≤ claimed {result.claimed_epsilon:.4g}")
    return result


# ---------------------------------------------------------------------------------------------
# contract checks (in the spirit of scikit-learn's check_estimator / parametrize_with_checks)
# ---------------------------------------------------------------------------------------------
#: a small, fast graph for the contract checks
CHECK_DATASET = "csbm:n=120,features=8"


def _tensors(obj: Any, depth: int = 0) -> list[Any]:
    """Every tensor/array in a (nested) release view, in a fixed order, as numpy arrays."""
    import dataclasses

    import numpy as np
    import torch

    from targets.base import resolve

    obj = resolve(obj)
    if depth > 6 or obj is None or callable(obj) and not isinstance(obj, torch.Tensor):
        return []
    if isinstance(obj, torch.Tensor):
        return [obj.detach().cpu().double().numpy()]
    if isinstance(obj, np.ndarray):
        return [np.asarray(obj, dtype=float)]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return [np.asarray(float(obj))]
    if isinstance(obj, dict):
        return [t for k in sorted(obj, key=str) for t in _tensors(obj[k], depth + 1)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v, depth + 1)]
    if dataclasses.is_dataclass(obj):
        return [t for f in dataclasses.fields(obj) for t in _tensors(getattr(obj, f.name), depth + 1)]
    if hasattr(obj, "__dict__"):
        return [t for k in sorted(vars(obj)) for t in _tensors(vars(obj)[k], depth + 1)]
    return []


def _fingerprint(release: Any, graph: Any) -> dict[str, list[Any]]:
    """What a release shows at each of its views (the api view: posteriors of the first nodes)."""
    import torch

    out = {}
    for level in release.levels:
        view = release.view(level)
        if level == Level.API:
            nodes = torch.arange(min(10, int(graph.num_nodes)))
            out[level] = _tensors(view(graph, nodes))
        else:
            out[level] = _tensors(view)
    return out


def _same(a: dict[str, list[Any]], b: dict[str, list[Any]]) -> bool:
    import numpy as np

    return a.keys() == b.keys() and all(
        len(a[k]) == len(b[k]) and all(x.shape == y.shape and np.allclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True)
                                       for x, y in zip(a[k], b[k])) for k in a)


def target_checks(target: Any, *, params: dict[str, Any] | None = None, dataset: str = CHECK_DATASET
                  ) -> list[tuple[str, Any]]:
    """The contract checks of a target (a class, or a registry name / ``package.module:Class``):
    ``(name, check)`` pairs, each check a callable of no argument that raises AssertionError (and
    returns "not probed: …" where it could not look)."""
    import math

    import torch

    from audit.play import data
    from targets import base

    name = target if isinstance(target, str) else None
    cls = base.get(target) if isinstance(target, str) else target
    params = {k: str(v) for k, v in (params or {}).items()}

    def build(**changes: Any) -> Any:
        config = base.replace_config(cls.Config(), **{**params, **changes})
        return cls(config)

    def graph() -> Any:
        return data.load(dataset, seed=0)

    def rng(seed: int) -> torch.Generator:
        return torch.Generator().manual_seed(seed)

    def determinism() -> None:
        g, t = graph(), build(epsilon=2.0)
        t.prepare(g)
        a, b = _fingerprint(t.fit(g, rng(7)), g), _fingerprint(t.fit(g, rng(7)), g)
        assert _same(a, b), f"{cls.__name__}: two fits with the same seed release different views"
        # and the seed is used: another one changes what is released (some view moves)
        c = _fingerprint(t.fit(g, rng(8)), g)
        assert not _same(a, c), f"{cls.__name__}: fits with different seeds release the same views"

    def calibration() -> None:
        g = graph()
        for eps in (1.0, 4.0):
            claimed = build(epsilon=eps).claim(g).epsilon
            if math.isinf(claimed):  # no claim (a non-private baseline)
                return
            assert abs(claimed - eps) <= 0.02 * eps, (
                f"{cls.__name__}: built for ε = {eps}, its accountant claims ε = {claimed}")

    def batch() -> None:
        t = build(epsilon=2.0)
        if not t.batched:
            return
        g = graph()
        t.prepare(g)
        batched = t.fit_batch(g, [rng(3), rng(4)])
        assert len(batched) == 2, f"{cls.__name__}.fit_batch returned {len(batched)} releases for 2 generators"
        for release, seed in zip(batched, (3, 4)):
            assert _same(_fingerprint(release, g), _fingerprint(t.fit(g, rng(seed)), g)), (
                f"{cls.__name__}: fit_batch(graph, rngs)[j] differs from fit(graph, rngs[j])")

    def levels() -> None:
        g, t = graph(), build(epsilon=2.0)
        t.prepare(g)
        release = t.fit(g, rng(1))
        extra = set(release.levels) - set(t.levels)
        assert not extra, f"{cls.__name__}: the release offers undeclared views {sorted(extra)}"
        # a trace exists only where a gradient canary joins the run (DP-SGD configurations)
        missing = set(t.levels) - set(release.levels) - {Level.TRACE}
        assert not missing, f"{cls.__name__}: declares views {sorted(missing)} its release does not offer"
        for level in release.levels:
            release.view(level)

    def release(g: Any, **changes: Any) -> dict[str, list[Any]]:
        t = build(epsilon=2.0, **changes)
        t.claim(g)
        t.prepare(g)
        return _fingerprint(t.fit(g, rng(1)), g)

    def bugs() -> None:
        """Each planted bug changes what is released (same seed as the correct target), on the
        check graph or else in a configuration the bug catalogue audits it in."""
        for bug in cls.bugs:
            assert build(epsilon=2.0, bug=bug).bug(bug)
            settings = [({}, dataset)] + [(e.params, e.dataset) for e in _catalogue_entries(name, bug)]
            for changes, where in settings:
                g = data.load(where, seed=0)
                changes = {k: v for k, v in changes.items() if k != "bug"}
                if not _same(release(g, **changes), release(g, bug=bug, **changes)):
                    break
            else:
                raise AssertionError(f"{cls.__name__}: planted bug {bug!r} releases exactly what the correct "
                                     f"target releases (seed 1) in {[w for _, w in settings]}")

    def sensitivity() -> str | None:
        """The claimed Δ of each noisy step against the generic sensitivity probe on the check
        graph and every graph of ≤ 3 nodes; returns "not probed: …" where the target declares no
        step the probe can read."""
        from canaries import sensitivity as probe

        report = probe.probe(build(epsilon=2.0), graph(), candidates=8, max_nodes=3, use_families=False)
        if report.not_probed:
            return report.not_probed
        for step in report.steps:
            assert not step.violation, (f"{cls.__name__}: {step.step.name} measured "
                                        f"{step.best.measured:.6g} > claimed {step.best.claimed:.6g}")
        return None

    def registry() -> None:
        if name is not None and ":" not in name:
            assert name in base.available() and base.get(name) is cls
        assert issubclass(cls, base.Target) and issubclass(cls.Config, base.TargetConfig)

    return [("determinism", determinism), ("calibration", calibration), ("fit_batch", batch),
            ("levels", levels), ("bugs", bugs), ("sensitivity", sensitivity), ("registry", registry)]


def _catalogue_entries(target: str | None, bug: str) -> list[Any]:
    from audit.plan import catalogue

    return [e for e in catalogue.CATALOGUE if target is not None and e.target == target and e.bug == bug]


def check_target(target: Any, **kwargs: Any) -> list[str]:
    """Run every :func:`target_checks` check; returns their names, each with what it could not
    probe (AssertionError on a failure)."""
    done = []
    for name, check in target_checks(target, **kwargs):
        note = check()
        done.append(f"{name} ({note})" if note else name)
    return done


def _attack_fixtures() -> dict[str, tuple[str, dict[str, str], str, str]]:
    """For each attack a registered target fixtures, the first such target in registration order:
    (target, params, canary, dataset)."""
    from targets.base import REGISTRY, get

    out: dict[str, tuple[str, dict[str, str], str, str]] = {}
    for name in REGISTRY.names():
        for attack, (params, canary) in get(name).attack_fixtures.items():
            params = dict(params)  # a "dataset" key names the fixture's dataset (default CHECK_DATASET)
            out.setdefault(attack, (name, params, canary, params.pop("dataset", CHECK_DATASET)))
    return out


#: for each registered attack, a small audit where it applies: (target, params, canary, dataset),
#: declared by the targets (``Target.attack_fixtures``)
ATTACK_FIXTURES: dict[str, tuple[str, dict[str, str], str, str]] = _attack_fixtures()


#: membership attacks: they read a model whose training stays random with the noise off (initial
#: weights, batches), so one node's membership moves its scores without deciding them; and scores of a
#: Poisson-sampled trace (``gradient-max`` on its q = 0.1 fixture), where the canary misses every step
#: with probability (1 − q)^T, so the IN world sometimes reads as OUT. Their no-noise check asks them to
#: beat chance (one-sided Mann–Whitney p ≤ 0.05) instead of AUC ≥ 0.9
BEATS_CHANCE_ONLY = frozenset({"gmia", "lira", "lira-online", "rmia", "gradient-max"})
#: attacks whose signal is the noise itself: a no-noise target gives them nothing to read
NOT_PROBED_WITHOUT_NOISE = {"fresh-query": "reads the difference between fresh noise draws per query",
                            "realised-mean-lrt": "is the likelihood ratio of a Gaussian trace's law: with the "
                                                 "noise off there is no law to read",
                            "shuffle-lrt": "is the likelihood ratio of a Gaussian trace's law: with the noise off "
                                           "there is no law to read"}
#: attacks that fail the no-noise check on their fixture, with what was measured; the check asserts
#: they still do (so a fix is noticed and the entry removed)
NO_NOISE_GAPS = {"linkteller": "on its fixture (an api that ignores the query graph) the scores separate the "
                               "worlds in the wrong direction: AUC 0.0 with the noise off",
                 "learned-weights": "on its fixture's weights (DP-SGD GCN, node removed) AUC 0.28 with the noise off "
                                    "over 16 trials: below chance, where the membership attacks reach 0.81-0.94"}
#: the AUC an attack must reach on its fixture with the noise off
NO_NOISE_AUC = 0.9


def _fixture(name: str, target: str | None, params: dict[str, Any] | None, canary: str | None,
             dataset: str | None) -> tuple[str, str | None, dict[str, str], str, str]:
    """(target, bug, params, canary, dataset) of an attack's check: the arguments, else its fixture."""
    fixture = ATTACK_FIXTURES.get(name, (None, {}, "auto", CHECK_DATASET))
    target = target or fixture[0]
    if target is None:
        raise ValueError(f"no fixture for attack {name!r}: pass target= (and params=, canary=)")
    params = {k: str(v) for k, v in (fixture[1] if params is None else params).items()}
    bug = params.pop("bug", None)
    return target, bug, params, canary or fixture[2], dataset or fixture[3]


def _play(target: str, bug: str | None, params: dict[str, str], canary: str, dataset: str, attack: str,
          trials: int) -> tuple[Result, Any, Any]:
    """A short cp game; (result, OUT scores, IN scores)."""
    import numpy as np

    from audit.records.store import Store

    spec = AuditSpec(target=target, epsilon=2.0, bug=bug, params=params, dataset=dataset, canary=canary,
                     attack=attack, trials=trials, estimator="cp")
    with tempfile.TemporaryDirectory(prefix="dpgnn-check-") as tmp:
        result = run_audit(spec, out=tmp, progress=False)
        with Store(result["store"]) as store:
            rows = np.array([(bit, score) for _, bit, score in store.trials(result["key"])], dtype=float)
    return result, rows[rows[:, 0] == 0, 1], rows[rows[:, 0] == 1, 1]


def check_attack_power(name: str, *, target: str | None = None, params: dict[str, Any] | None = None,
                       canary: str | None = None, dataset: str | None = None, trials: int = 16) -> str:
    """The attack on its fixture target with the noise off (the target's ``no-noise`` bug; a target
    that claims no privacy as it is) must separate the worlds: AUC ≥ :data:`NO_NOISE_AUC`, or,
    for :data:`BEATS_CHANCE_ONLY`, a one-sided Mann–Whitney p ≤ 0.05. AssertionError otherwise.
    Returns what was checked, or why nothing was ("not probed: …")."""
    import math

    from scipy.stats import mannwhitneyu

    from targets import base

    if name in NOT_PROBED_WITHOUT_NOISE:
        return f"not probed: {name} {NOT_PROBED_WITHOUT_NOISE[name]}"
    target, bug, params, canary, dataset = _fixture(name, target, params, canary, dataset)
    if "no-noise" in base.get(target).bugs:
        bug = "no-noise"
    elif not math.isinf(base.build(target, epsilon=2.0, **params).claim(data_graph(dataset)).epsilon):
        return f"not probed: {target} has no no-noise switch"
    result, out, inn = _play(target, bug, params, canary, dataset, name, trials)
    if name in NO_NOISE_GAPS:
        assert result.auc < NO_NOISE_AUC, f"{name} now separates the worlds (AUC {result.auc:.2f}): drop NO_NOISE_GAPS"
        return f"known gap: AUC {result.auc:.2f}; {NO_NOISE_GAPS[name]}"
    if name in BEATS_CHANCE_ONLY:
        p = float(mannwhitneyu(inn, out, alternative="greater").pvalue)
        assert p <= 0.05, f"{name} on {target} with no noise: AUC {result.auc:.2f}, Mann–Whitney p = {p:.3f} > 0.05"
        return f"AUC {result.auc:.2f}, Mann–Whitney p = {p:.3g}"
    assert result.auc >= NO_NOISE_AUC, (f"{name} on {target} with no noise: AUC {result.auc:.2f} < {NO_NOISE_AUC}: "
                                        f"it does not separate worlds that its view decides")
    return f"AUC {result.auc:.2f}"


def data_graph(dataset: str) -> Any:
    from audit.play import data

    return data.load(dataset, seed=0)


def check_attack(name: str, *, target: str | None = None, params: dict[str, Any] | None = None,
                 canary: str | None = None, dataset: str | None = None, trials: int = 8,
                 no_noise: bool = True) -> Result:
    """The contract of an attack: the registry gives back the class under its name, it declares
    views, a short game on a target offering its view scores every trial finitely (the game
    raises on a non-finite score), and, with `no_noise`, :func:`check_attack_power`.
    ``target``/``params``/``canary``/``dataset`` default to :data:`ATTACK_FIXTURES` (needed for an
    attack not in it). Returns the short game's result."""
    from attacks import base as attacks

    cls = attacks.get(name)
    assert issubclass(cls, attacks.Attack), f"{name}: not an attacks.base.Attack"
    attack = attacks.make(name)
    assert ":" in name or attack.name == name, f"registry name {name!r}, attack.name {attack.name!r}"
    assert attack.levels, f"{name}: declares no view (levels)"
    fixture = _fixture(name, target, params, canary, dataset)
    result = _play(*fixture, name, trials)[0]
    assert result.attack == name and result.level in attack.levels and result.trials == trials
    if no_noise:
        check_attack_power(name, target=target, params=params, canary=canary, dataset=dataset)
    return result
