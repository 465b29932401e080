"""The code identity that keys stored trials: it moves with the code of what a run uses."""
import hashlib
import subprocess
import textwrap

import pytest

from audit.records import provenance


def _module(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_source_hash_follows_the_file_content(tmp_path):
    path = _module(tmp_path, "user_target", "X = 1\n")
    before = provenance.source_hash(path)
    assert provenance.source_hash(path) == before
    path.write_text("X = 2\n")
    assert provenance.source_hash(path) != before


def test_source_hash_of_a_class_covers_its_package(tmp_path, monkeypatch):
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("SCALE = 1.0\n")
    (pkg / "trainer.py").write_text("from userpkg.helpers import SCALE\nclass T:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    cls = importlib.import_module("userpkg.trainer").T
    before = provenance.source_hash(cls)
    (pkg / "helpers.py").write_text("SCALE = 0.5\n")  # a helper of the class's package changed
    assert provenance.source_hash(cls) != before


def test_code_identity_names_version_checkout_and_sources():
    from targets.gaussian import GaussianMechanism

    ident = provenance.code_identity(GaussianMechanism)
    assert set(ident) == {"version", "format", "commit", "tree", "diff", "sources", "key"}
    assert len(ident["key"]) == 16
    assert provenance.code_identity(GaussianMechanism)["key"] == ident["key"]
    assert "code " + ident["key"][:8] in provenance.describe(ident)


def test_source_hash_follows_module_level_project_imports(tmp_path, monkeypatch):
    """A target's module imports a shared project module (as targets/gap/ imports
    targets/common/stacked_mlp.py): an edit there changes the hash; a lazy import inside a function
    does not count, and neither do imports from outside the project's source folders."""
    pkg = tmp_path / "repo" / "targets"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("from . import deeper\nSCALE = 1.0\n")
    (pkg / "deeper.py").write_text("DEPTH = 1\n")
    (pkg / "lazy.py").write_text("LAZY = 1\n")
    (tmp_path / "user").mkdir()
    user = _module(tmp_path / "user", "user_module",
                   "import math\nfrom targets.helper import SCALE\ndef f():\n    import targets.lazy\n")
    monkeypatch.setattr(provenance, "REPO", tmp_path / "repo")
    monkeypatch.setattr(provenance, "SOURCE_DIRS", ("targets",))
    before = provenance.source_hash(user)
    (pkg / "lazy.py").write_text("LAZY = 2\n")
    assert provenance.source_hash(user) == before
    (pkg / "deeper.py").write_text("DEPTH = 2\n")  # imported by the imported helper: transitively
    after = provenance.source_hash(user)
    assert after != before
    (pkg / "helper.py").write_text("from . import deeper\nSCALE = 0.5\n")
    assert provenance.source_hash(user) != after


def test_the_key_follows_the_source_trees_not_the_commit(monkeypatch):
    """A commit that changes only docs or results keeps stored trials (same source trees); a change
    of a source folder's tree does not."""
    from targets.gaussian import GaussianMechanism

    def key(commit, tree):
        monkeypatch.setattr(provenance, "_checkout_base", lambda: (commit, tree, True))
        return provenance.code_identity(GaussianMechanism)

    a = key("a" * 40, "1" * 16)
    b = key("b" * 40, "1" * 16)
    assert a["key"] == b["key"] and a["commit"] != b["commit"]
    assert key("a" * 40, "2" * 16)["key"] != a["key"]


def test_the_tree_hash_is_that_of_the_source_folders_at_head():
    commit, tree, is_checkout = provenance._checkout_base()
    if not is_checkout:
        pytest.skip("not a git checkout")
    listing = subprocess.run(["git", "-C", str(provenance.REPO), "ls-tree", "HEAD", "--", *provenance.SOURCE_DIRS],
                             capture_output=True, check=True).stdout
    assert len(listing.splitlines()) == len(provenance.SOURCE_DIRS)  # one tree per source folder
    assert tree == hashlib.sha256(listing).hexdigest()[:16]


def test_an_import_added_after_a_first_hash_is_followed(tmp_path, monkeypatch):
    """The import graph is parsed once per version of a file in a process: an import added later (same
    process, new content) is followed, so the hash then covers the newly imported module."""
    pkg = tmp_path / "repo" / "targets"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "extra.py").write_text("EXTRA = 1\n")
    user = _module(tmp_path, "user_module2", "X = 1\n")
    monkeypatch.setattr(provenance, "REPO", tmp_path / "repo")
    monkeypatch.setattr(provenance, "SOURCE_DIRS", ("targets",))
    provenance.source_hash(user)
    user.write_text("from targets.extra import EXTRA\nX = 1\n")
    with_import = provenance.source_hash(user)
    (pkg / "extra.py").write_text("EXTRA = 2\n")
    assert provenance.source_hash(user) != with_import
