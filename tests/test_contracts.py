"""Every registered target and attack against its contract (audit.testing's checks)."""
import pytest

from attacks import base as attacks
from audit.testing import ATTACK_FIXTURES, check_attack, target_checks
from targets import base as targets

TARGET_CHECKS = [(name, check_name, check) for name in targets.available()
                 for check_name, check in target_checks(name)]


@pytest.mark.parametrize("name, check_name, check", TARGET_CHECKS,
                         ids=[f"{n}-{c}" for n, c, _ in TARGET_CHECKS])
def test_target_contract(name, check_name, check):
    note = check()
    if note:  # said as such, never as a pass
        pytest.skip(note)


#: attacks whose check takes minutes (adam-lrt tabulates each world's exact law): run with -m slow
SLOW_ATTACKS = {"adam-lrt"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_ATTACKS else n
                                  for n in attacks.available()])
def test_attack_contract(name):
    assert name in ATTACK_FIXTURES, f"add a fixture for attack {name!r} to audit.testing.ATTACK_FIXTURES"
    check_attack(name)


def test_attack_registry_round_trip():
    class Probe(attacks.Attack):
        name = "probe-attack"
        levels = ("mechanism",)

        def score(self, release, pair, graph=None):
            return 0.0

    attacks.register("probe-attack", Probe)
    try:
        assert attacks.get("probe-attack") is Probe and "probe-attack" in attacks.available()
        with pytest.raises(ValueError, match="already registered"):
            attacks.register("probe-attack", Probe)
        assert isinstance(attacks.make("attacks.mechanism:MechanismLRT"), attacks.Attack)
        with pytest.raises(ValueError, match="unknown attack"):
            attacks.get("nope")
        p = Probe()
        assert p.score_batch([None, None], None) == [0.0, 0.0] and p.queries_for(None) is None
        assert p.natural_threshold_for(None) is None and p.model_scores(None, None) is None
        assert not Probe.reads_probe
    finally:
        attacks.register("probe-attack", attacks.get("mechanism-lrt"), force=True)
        attacks.REGISTRY.unregister("probe-attack")
