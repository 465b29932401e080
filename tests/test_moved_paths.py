"""The flat module paths of audit/ before its role folders still import, warn, and are the new modules."""
from __future__ import annotations

import importlib
import sys

import pytest

import audit
from audit import _moved


def _forget(old: str) -> None:
    """Drop an old path from the import caches, as in a fresh process."""
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        del sys.modules[name]
    parent, _, child = old.rpartition(".")
    if parent in sys.modules and child in vars(sys.modules[parent]):
        delattr(sys.modules[parent], child)


@pytest.fixture
def fresh_old_paths():
    for old in _moved.MOVED:
        _forget(old)
    yield
    for old in _moved.MOVED:
        _forget(old)


def test_import_of_an_old_path_warns_and_is_the_new_module(fresh_old_paths):
    from audit.play import game as new

    with pytest.warns(DeprecationWarning, match=r"audit\.game moved to audit\.play\.game"):
        import audit.game as old
    assert old is new


def test_from_an_old_path_import_a_name(fresh_old_paths):
    from audit.play.game import run_audit as new

    with pytest.warns(DeprecationWarning, match="audit.play.game"):
        from audit.game import run_audit
    assert run_audit is new


def test_from_audit_import_an_old_module(fresh_old_paths):
    from audit.records import store as new

    with pytest.warns(DeprecationWarning, match=r"audit\.store moved to audit\.records\.store"):
        from audit import store
    assert store is new


def test_a_submodule_of_a_moved_package_follows_it(fresh_old_paths):
    from audit.stats.estimators import core as new

    with pytest.warns(DeprecationWarning, match=r"audit\.estimators\.core moved to audit\.stats\.estimators\.core"):
        old = importlib.import_module("audit.estimators.core")
    assert old is new


def test_the_warning_points_at_the_importer(fresh_old_paths):
    with pytest.warns(DeprecationWarning) as seen:
        import audit.budget  # noqa: F401
    assert [w.filename for w in seen] == [__file__]


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_every_old_path_is_its_new_module(fresh_old_paths, old):
    with pytest.warns(DeprecationWarning):
        module = importlib.import_module(old)
    assert module is importlib.import_module(_moved.MOVED[old])
    assert module.__name__ == _moved.MOVED[old]


def test_a_path_that_never_existed_is_not_found():
    assert _moved.new_home("audit.nothing") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("audit.nothing")


def test_new_paths_do_not_warn(recwarn):
    importlib.import_module("audit.play.game")
    importlib.import_module("audit.stats.estimators.core")
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning) and "moved to" in str(w.message)]


def test_the_finder_is_installed_once_for_every_package():
    from targets.common import moved

    _moved.install()
    assert sum(isinstance(f, moved.OldPathFinder) for f in sys.meta_path) == 1
    assert audit.__name__ == "audit"
    assert moved.new_home("targets.accounting")[0] == "targets.common.accounting"  # targets' moves, the same finder
    assert moved.new_home("audit.estimators.core")[0] == "audit.stats.estimators.core"
