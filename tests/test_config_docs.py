"""Every config key of every registered target is documented (``python -m audit list --target T``)."""
from __future__ import annotations

import pytest

from targets.base import available, config_help, get


@pytest.mark.parametrize("name", available())
def test_every_config_key_has_a_meaning(name):
    rows = config_help(get(name).Config)
    assert rows
    missing = [r["key"] for r in rows if not r["meaning"].strip()]
    assert not missing, f"{name}: config keys without an Args: entry: {', '.join(missing)}"


@pytest.mark.parametrize("name", available())
def test_every_config_key_has_a_type(name):
    untyped = [r["key"] for r in config_help(get(name).Config) if not r["type"].strip()]
    assert not untyped, f"{name}: {untyped}"


def test_registry_covers_the_builtin_targets():
    assert {"caribou", "gap", "gaussian", "gcn", "edgerand", "lapgraph", "gcon", "heterpoisson", "dpsgd-gcn",
            "dpdgc"} <= set(available())
