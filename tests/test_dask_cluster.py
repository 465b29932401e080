"""The Dask backend on a real cluster: a scheduler and two worker processes over TCP on localhost
(runs in CI: ``.ci/run`` installs the ``dask`` extra and sets ``AUDIT_REQUIRE_CLUSTER``)."""
import os

import pytest

from audit.play.game import AuditSpec, run_audit
from audit.records.store import Store

if os.environ.get("AUDIT_REQUIRE_CLUSTER"):  # .ci/run: a missing dask extra fails, never skips
    import dask.distributed  # noqa: F401
else:
    pytest.importorskip("dask.distributed")


def _trials(result):
    with Store(result["store"]) as s:
        return s.trials(result["key"])


@pytest.mark.cluster
@pytest.mark.timeout(240)
def test_an_audit_on_two_worker_processes_over_tcp_equals_the_local_run(tmp_path):
    from dask.distributed import Client

    from audit.play.cluster import tasks_done, tcp_cluster

    spec = AuditSpec(target="gaussian", epsilon=2.0, trials=96, seed=5, batch=8)
    local = run_audit(spec, out=tmp_path / "local", progress=False)
    with tcp_cluster(workers=2) as address:
        assert address.startswith("tcp://127.0.0.1:")
        with Client(address) as client:
            pids = client.run(os.getpid)
            remote = run_audit(spec, out=tmp_path / "cluster", progress=False, backend="dask", scheduler=address)
            executed = tasks_done(client)
    assert len(pids) == 2 and len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert all(count > 0 for count in executed.values()), f"a worker played no chunk: {executed}"
    assert _trials(local) == _trials(remote) and len(_trials(remote)) == 96
    assert remote["eps_lb"] == local["eps_lb"] and remote["ci"] == local["ci"]
