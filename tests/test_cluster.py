"""Jobs on a Dask cluster started the way a user with several machines starts one: a scheduler
and workers as separate processes from Dask's own commands (``dask scheduler``, ``dask
worker``) on this machine's loopback.  A worker killed while it runs a job costs that job's
re-run on another worker and nothing else; ``t3 sweep --scheduler`` runs its verified jobs
there."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from sim.sweep import Job, run_jobs
from t3.cli import main


def _start(args, log):
    """A ``dask`` command in a session of its own (so the whole worker, nanny and its
    children, dies as one machine would)."""
    return subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _wait(predicate, timeout, what):
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def cluster(tmp_path):
    """``(address, [worker processes])``: a scheduler and two single-thread workers."""
    file = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "w")
    procs = [_start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(file)], log)]
    try:
        _wait(file.exists, 60, "the scheduler's file")
        _wait(lambda: json.loads(file.read_text() or "{}").get("address"), 60,
              "the scheduler's address")
        address = json.loads(file.read_text())["address"]
        workers = [_start(["worker", address, "--nthreads", "1", "--nworkers", "1",
                           "--name", f"w{i}", "--no-dashboard"], log) for i in range(2)]
        procs += workers
        from dask.distributed import Client
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        yield address, workers
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        log.close()


def test_a_dead_worker_costs_its_jobs_rerun_and_nothing_else(cluster, tmp_path):
    address, workers = cluster
    log = tmp_path / "jobs.log"
    jobs = [Job(f"j{i}", "os:system",
                (f"echo start j{i} >> {log}; sleep 3; echo end j{i} >> {log}",))
            for i in range(4)]
    out = {}
    runner = threading.Thread(target=lambda: out.update(
        run_jobs(jobs, scheduler=address, progress=False)))
    runner.start()
    # both workers busy with a job each: kill one, as a machine would die
    def running():
        text = log.read_text() if log.exists() else ""
        return text.count("start") - text.count("end")
    _wait(lambda: running() >= 2, 60, "two jobs running")
    os.killpg(workers[0].pid, signal.SIGKILL)
    runner.join(timeout=120)
    assert not runner.is_alive()
    assert {n: (o.ok, o.value) for n, o in out.items()} == {f"j{i}": (True, 0)
                                                            for i in range(4)}
    lines = log.read_text().split("\n")
    ends = sorted(line for line in lines if line.startswith("end"))
    starts = [line for line in lines if line.startswith("start")]
    # every job finished exactly once; the killed worker's job started twice
    assert ends == [f"end j{i}" for i in range(4)]
    assert len(starts) == 5 and sorted(set(starts)) == [f"start j{i}" for i in range(4)]


def test_t3_sweep_runs_on_the_cluster(cluster, tmp_path, capsys):
    address, _ = cluster
    results = tmp_path / "sweep.json"
    assert main(["sweep", "--gpus", "2", "--vary", "k=64,96", "--configs", "sequential,t3",
                 "--scheduler", address, "--no-cache", "--json", str(results)]) == 0
    out = capsys.readouterr().out
    assert f"2 points x 2 configurations = 4 jobs on {address}" in out
    assert "4 of 4 runs verified" in out
    runs = json.loads(results.read_text())
    assert len(runs) == 4 and all(r["ok"] and r["value"]["verified"] for r in runs.values())
