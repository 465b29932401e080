import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
if "AUDIT_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["AUDIT_DATA_DIR"] = str(_SHARED)
# under pytest-xdist (-n 2) each worker processes the PyG datasets into its own cache folder: two
# processes writing one folder's processed files at once could read each other's half-written files
if os.environ.get("PYTEST_XDIST_WORKER"):
    _CACHE = os.environ.get("AUDIT_CACHE_DIR") or str(Path.home() / ".cache" / "dpgnn-audit" / "pyg")
    os.environ["AUDIT_CACHE_DIR"] = str(Path(_CACHE) / os.environ["PYTEST_XDIST_WORKER"])


@pytest.fixture(scope="session")
def tight_out(tmp_path_factory) -> Path:
    """One results folder per test process for the tight catalogue entries (``tests/size.py``):
    the honest check and the mutants' checks read the same stored trials, played once (a mutant
    changes only the estimate; one-run entries replay their single run)."""
    return tmp_path_factory.mktemp("tight-entries")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = os.environ.get("AUDIT_DATA_DIR")
    if not path or not Path(path).is_dir():
        pytest.skip("AUDIT_DATA_DIR is not set to the offline datasets")
    return Path(path)


@pytest.fixture(scope="session")
def spec_numbers(data_dir):
    """``spec_numbers(*names)``: every decimal number written in ``specs/<name>.md`` (the specs sit
    beside the offline datasets), the source that published values in the code must cite."""
    import re

    specs = data_dir.parent / "specs"
    if not specs.is_dir():
        pytest.skip(f"no specs beside the datasets ({specs})")

    def numbers(*names):
        return {float(x) for n in names for x in re.findall(r"\d+\.\d+", (specs / f"{n}.md").read_text())}

    return numbers


@pytest.fixture(scope="module")
def make_csbm():
    """A factory of contextual-SBM graphs, ``make_csbm(n=..., seed=...)`` (``audit.play.data.csbm``'s
    arguments), each built once per test module; with no argument, the embedded default graph
    (``load("csbm")``). Module-scoped, like the per-file fixtures it replaces, so a test that
    mutates a graph never leaks into another module."""
    from audit.play.data import csbm, load

    cache = {}

    def make(**kwargs):
        key = tuple(sorted(kwargs.items()))
        if key not in cache:
            cache[key] = csbm(**kwargs) if kwargs else load("csbm")
        return cache[key]

    return make


@pytest.fixture(scope="module")
def csbm(make_csbm):
    """The embedded default graph (``load("csbm")``), loaded once per test module."""
    return make_csbm()


@pytest.fixture(scope="module")
def small_csbm(make_csbm):
    """A 120-node, 3-class, 8-feature graph (seed 3): the gradient, LiRA, GMIA and Adam-LRT tests'."""
    return make_csbm(n=120, classes=3, features=8, seed=3)


@pytest.fixture
def stored_runs(tmp_path):
    """``stored_runs(target, params, settings)`` plays a 24-trial audit (seed 2) once per
    ``(name, batch, jobs)`` of `settings`, each in its own folder, and returns
    ``{name: (stored (index, bit, score) rows, ε_lb)}``: the same seed must give the same trials
    whatever the batching."""
    from audit.play.game import AuditSpec, run_audit
    from audit.records.store import Store

    def play(target, params, settings):
        runs = {}
        for name, batch, jobs in settings:
            spec = AuditSpec(target=target, params=params, trials=24, seed=2, batch=batch)
            result = run_audit(spec, out=tmp_path / name, progress=False, jobs=jobs)
            with Store(result["store"]) as s:
                runs[name] = (s.trials(result["key"]), result["eps_lb"])
        return runs

    return play
