"""A Dask cluster of separate processes on this machine: one scheduler and N workers, started
from the ``dask scheduler`` / ``dask worker`` command lines and joined over TCP on localhost, as a
real cluster is (trials and results cross process boundaries pickled; nothing is shared in memory).

    with tcp_cluster(workers=2) as address:
        run_audit(spec, backend="dask", scheduler=address)

Used by the multi-process Dask test and ``benchmarks/dask_cluster.py``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def tcp_cluster(workers: int = 2, threads: int = 1, timeout: float = 60.0) -> Iterator[str]:
    """Start a scheduler and `workers` single-process workers (each `threads` threads) on
    127.0.0.1; yield the scheduler's ``tcp://`` address once every worker has joined; stop them all."""
    from dask.distributed import Client

    folder = Path(tempfile.mkdtemp(prefix="dpgnn-dask-"))
    info = folder / "scheduler.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    quiet = dict(stdout=subprocess.DEVNULL, stderr=open(folder / "log", "w"), env=env)
    cli = [sys.executable, "-m", "dask"]
    procs = [subprocess.Popen([*cli, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(info)], **quiet)]
    try:
        address = _wait_for_address(info, procs[0], timeout)
        procs += [subprocess.Popen([*cli, "worker", address, "--nthreads", str(threads), "--nworkers", "1",
                                    "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                    "--local-directory", str(folder / f"w{k}")], **quiet)
                  for k in range(workers)]
        with Client(address, timeout=timeout) as client:
            client.wait_for_workers(workers, timeout=timeout)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        quiet["stderr"].close()


def _wait_for_address(info: Path, scheduler: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scheduler.poll() is not None:
            raise RuntimeError(f"the dask scheduler exited with status {scheduler.returncode}")
        if info.exists():
            try:
                return json.loads(info.read_text())["address"]
            except (json.JSONDecodeError, KeyError):
                pass
        time.sleep(0.1)
    raise TimeoutError(f"the dask scheduler did not start within {timeout:.0f} s")


def tasks_done(client) -> dict[str, int]:
    """Tasks each worker of `client`'s cluster has executed, by worker address."""
    return client.run(_executed_count)


def _executed_count(dask_worker) -> int:
    return dask_worker.state.executed_count
