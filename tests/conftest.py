import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
if "AUDIT_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["AUDIT_DATA_DIR"] = str(_SHARED)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = os.environ.get("AUDIT_DATA_DIR")
    if not path or not Path(path).is_dir():
        pytest.skip("AUDIT_DATA_DIR is not set to the offline datasets")
    return Path(path)


@pytest.fixture(scope="module")
def csbm():
    """The embedded default graph, loaded once per test module."""
    from audit.data import load

    return load("csbm")
