"""The target contract, short: what a target is, and where each part of it lives.

* :class:`~targets.core.TargetCore` (:mod:`targets.core`): the minimum every target states:
  ``name``, ``Config``, ``levels``, ``bugs``, ``config``, ``unit``, :meth:`claim`, :meth:`fit`.
* :class:`~targets.common.claim.Claim` (:mod:`targets.common.claim`): what :meth:`claim` returns, a
  frozen typed value (unit, accountant, the composition it charges, the trace law).
* :class:`~targets.release.Release` (:mod:`targets.release`): what :meth:`fit` returns, by view.
* The optional protocols (:mod:`targets.protocols`): cost and batching, preprocessing, the probe,
  the witness, gradient canaries, neighbour sampling and the catalogue, each a mixin with the
  defaults; :class:`~targets.target.Target` is the core with all of them, the base every target
  subclasses, and :func:`~targets.protocols.implements` says which a target states itself.
* :class:`~targets.config.TargetConfig` (:mod:`targets.config`) and the registry
  (:mod:`targets.registered`: ``register``, ``get``, ``build``).

Every name below was importable from here before the split and still is.
"""
from __future__ import annotations

from targets.common.accounting import check_delta, check_epsilon  # noqa: F401
from targets.common.catalogue import Entry  # noqa: F401
from targets.common.claim import (Claim, ClaimFieldMissing, Composed, GaussianStep, LaplaceStep, NoiseStep,  # noqa: F401
                                  Sampled, Series, TraceLaw, Unstated)
from targets.common.config_keys import config_fields, config_help, parse_assignments, replace_config  # noqa: F401
from targets.common.noise import NoiseLaw  # noqa: F401
from targets.common.pair_law import PairLaw  # noqa: F401
from targets.common.probe import (SampledStep, StepDeclaration, StepMap, TightPair, WitnessPlan,  # noqa: F401
                                  derived_step_maps, mechanism_declarations)
from targets.common.registry import Registry  # noqa: F401
from targets.common.runtime import (GLOBAL_RNG_LOCK, child_generator, noise_generator, one_torch_thread,  # noqa: F401
                                    pin_threads, resolve_device, seeded, split_accuracies)
from targets.common.value_enum import Level, Unit  # noqa: F401
from targets.config import TargetConfig  # noqa: F401
from targets.core import CORE_MEMBERS, C, TargetCore  # noqa: F401
from targets.protocols import (DECLARED_WITNESS_HOW, PROTOCOLS, SETUP_COST, TRIAL_COST, Batching,  # noqa: F401
                               Catalogued, GradientCanary, NeighbourSampling, Preprocessing, Probing, Witnessing,
                               charge_of, implements)
from targets.registered import (DEFAULT_TARGET, REGISTRY, available, build, check_release, get, on_cpu,  # noqa: F401
                                register)
from targets.release import LEVELS, Lazy, LazyDict, MechanismStep, Release, resolve, sync_fields  # noqa: F401
from targets.target import Target, protocols_of  # noqa: F401
