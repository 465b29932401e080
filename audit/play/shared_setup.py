"""What runs on one setup share: the portfolio's pilots and its certification play one (target,
dataset, ε, bug, parameters, seed), so the work a run does before its first trial is done once.

Shared, each under the key that decides it: the graph, target and claim (:class:`RunSetup`); the
probe's witness choice, by view; a canary's pair of worlds and the relation's charge for it, by
(setup, canary); the declared-model check, by (setup, canary, view, the attack's views); the
``auto`` canary of an attack; and, in each process, the target itself
(:func:`audit.play.trial_runner.shared_target`), so its per-world caches (a trained encoder, a sampler)
serve every run. Each is a pure function of its key and the run seed, so a run on a shared setup
plays and reports what it would alone.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from audit.play.run_spec import RunSetup

T = TypeVar("T")


class SharedSetup:
    """A run's setup and a memo of the work that depends only on the keys above."""

    def __init__(self, setup: RunSetup) -> None:
        self.setup = setup
        self._memo: dict[tuple[Any, ...], Any] = {}
        self.built: list[tuple[Any, ...]] = []

    def once(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """``compute()`` the first time `key` is asked for, the same object after."""
        if key not in self._memo:
            self._memo[key] = compute()
            self.built.append(key)
        return self._memo[key]


    def counts(self) -> dict[str, int]:
        """How many of each kind of setup work (the key's first element) were built."""
        out: dict[str, int] = {}
        for key in self.built:
            out[str(key[0])] = out.get(str(key[0]), 0) + 1
        return out


def once(shared: SharedSetup | None, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
    """`compute()` through `shared`'s memo, or directly where the run shares nothing."""
    return compute() if shared is None else shared.once(key, compute)
