"""The registry of targets, and building one from its name and ``--set`` parameters."""
from __future__ import annotations

from typing import Any

from targets.common.config_keys import replace_config
from targets.common.registry import Registry
from targets.release import Lazy, MechanismStep, Release
from targets.core import TargetCore
from targets.target import Target, with_defaults

REGISTRY: Registry[Target] = Registry("target", TargetCore, sort=True, adapt=with_defaults)
REGISTRY.register("gaussian", "targets.gaussian:GaussianMechanism")
REGISTRY.register("gcn", "targets.gcn:NonPrivateGCN")
REGISTRY.register("caribou", "targets.caribou:Caribou")
REGISTRY.register("gap", "targets.gap:GAP")
REGISTRY.register("dpdgc", "targets.dpdgc:DPDGC")
REGISTRY.register("heterpoisson", "targets.heterpoisson:HeterPoisson")
REGISTRY.register("gcon", "targets.gcon:GCON")
REGISTRY.register("dpsgd-gcn", "targets.dpsgd_gcn:DPSGDGCN")
REGISTRY.register("edgerand", "targets.edgerand:EdgeRand")
REGISTRY.register("lapgraph", "targets.lapgraph:LapGraph")


#: the target the main job audits (``AuditSpec``'s default)
DEFAULT_TARGET = "caribou"


def register(name: str, cls: type[TargetCore] | str, *, force: bool = False) -> None:
    """Register a target class (or a ``package.module:Class`` imported on first use): a :class:`Target`, or a
    bare :class:`~targets.core.TargetCore`, which runs with the defaults of the protocols it does not state."""
    REGISTRY.register(name, cls, force=force)


def get(name: str) -> type[Target]:
    """A target class by registry name, ``package.module:Class`` or ``path/to/file.py:Class``."""
    return REGISTRY.get(name)


def available() -> list[str]:
    """Names of the registered targets whose modules import."""
    return REGISTRY.available()


def check_release(release: Any, target: Target) -> Release:
    """`release` if it is a :class:`Release`, else a clear error naming the target."""
    who = f"target {type(target).__module__}.{type(target).__name__}"
    if not isinstance(release, Release):
        raise ValueError(f"{who}: fit() returned {type(release).__name__}, not a targets.base.Release (wrap its "
                         "views in Release(...))")
    steps = release.mechanism
    if steps is not None and not isinstance(steps, Lazy) and not (
            isinstance(steps, (list, tuple)) and all(isinstance(s, MechanismStep) for s in steps)):
        raise ValueError(f"{who}: Release(mechanism=...) must be a list of targets.base.MechanismStep (each "
                         f"the released output with its noiseless mean and noise std), got {type(steps).__name__}")
    return release


def on_cpu(target: Target) -> Target:
    """`target` if it runs on the CPU, else the same configuration on the CPU (for work whose result
    must not depend on the run's device, such as choosing the canary)."""
    if target.device.type == "cpu":
        return target
    return type(target)(replace_config(target.config, device="cpu"))


def build(name: str, *, epsilon: float | None = None, delta: float | None = None,
          bug: str | None = None, device: str | None = None, **params: Any) -> Target:
    """Build a target by name with the given ε, δ, bug and ``--set`` parameters."""
    cls = get(name)
    changes: dict[str, Any] = dict(params)
    if epsilon is not None:
        changes["epsilon"] = epsilon
    if delta is not None:
        changes["delta"] = delta
    if bug is not None:
        changes["bug"] = bug
    if device is not None:
        changes["device"] = device
    config = replace_config(cls.Config(), **changes)
    return cls(config)
