"""The fields every target config has (:class:`TargetConfig`) and the checks its subclasses run."""
from __future__ import annotations

import math
from dataclasses import dataclass

from targets.common.accounting import check_delta, check_epsilon


@dataclass
class TargetConfig:
    """Fields every target config has. Subclasses add their hyperparameters, with spec defaults.

    Args:
        epsilon (float): the target ε the accountant calibrates the noise to (default: 1.0).
        delta (float, optional): δ in [0, 1) (0: pure ε-DP, for an accountant that gives it); ``None``
            applies the paper's own δ rule to the graph.
        bug (str, optional): a planted bug from the target's ``bugs`` (default: none).
        device (str): ``cpu``, ``cuda`` or ``auto``.
    """

    epsilon: float = 1.0
    delta: float | None = None
    bug: str | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        if self.delta is not None:
            check_delta(self.delta, pure=True)  # 0: a pure ε-DP claim's δ, pinned (public_params)

    # ------------------------------------------------------------------ constraints (every config's checks)
    def require(self, key: str, ok: bool, what: str) -> None:
        """Raise ``The 'key' parameter must be WHAT, got VALUE`` unless `ok`."""
        if not ok:
            raise ValueError(f"The {key!r} parameter must be {what}, got {getattr(self, key)!r}")

    def require_all(self, checks: list[tuple[str, bool, str]]) -> None:
        """:meth:`require` on every (key, ok, what), in order."""
        for key, ok, what in checks:
            self.require(key, ok, what)

    def require_int(self, key: str, low: int, *, optional: bool = False) -> None:
        """An int ≥ `low` (None allowed where `optional`)."""
        value = getattr(self, key)
        if value is None and optional:
            return
        self.require(key, isinstance(value, int) and not isinstance(value, bool) and value >= low, f"an int >= {low}")

    def require_choice(self, key: str, options: tuple[str, ...]) -> None:
        self.require(key, getattr(self, key) in options, f"one of {', '.join(options)}")

    def require_number(self, key: str, *, above: float | None = None, at_least: float | None = None,
                       below: float | None = None, what: str = "a finite number") -> None:
        """A finite number (not a bool) with the given bounds, described as `what`."""
        v = getattr(self, key)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
            and (above is None or v > above) and (at_least is None or v >= at_least) and (below is None or v < below)
        self.require(key, ok, what)
