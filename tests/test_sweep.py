"""The sweep machinery (``sim/sweep.py``) through a Dask ``LocalCluster`` of two worker
processes: results in job order, a failing job reported with its one-line error while the
others' results are kept, and the cache re-running only what failed or changed."""

import json

import pytest

from sim.sweep import Job, job_key, run_jobs


JOBS = [Job("c52", "math:comb", (5, 2)), Job("c83", "math:comb", (8, 3)),
        Job("bad", "math:comb", (-1, 2)), Job("gcd", "math:gcd", (12, 18))]


def test_jobs_run_on_two_workers_and_a_failure_loses_nothing(tmp_path):
    out = run_jobs(JOBS, cache=tmp_path, workers=2, progress=False)
    assert list(out) == ["c52", "c83", "bad", "gcd"]
    assert {n: o.value for n, o in out.items() if o.ok} == {"c52": 10, "c83": 56, "gcd": 6}
    assert not out["bad"].ok
    assert out["bad"].error == "ValueError: n must be a non-negative integer"
    assert not any(o.cached for o in out.values())
    # the successes were stored under their keys; the failure was not
    stored = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert stored == {job_key(JOBS[0]): 10, job_key(JOBS[1]): 56, job_key(JOBS[3]): 6}
    # a re-run takes the stored results and runs only the failed job again
    again = run_jobs(JOBS, cache=tmp_path, workers=1, progress=False)
    assert [n for n, o in again.items() if o.cached] == ["c52", "c83", "gcd"]
    assert not again["bad"].ok and again["c83"].value == 56


def test_a_job_key_follows_its_arguments_and_its_code():
    a, b = Job("x", "math:comb", (5, 2)), Job("y", "math:comb", (5, 3))
    assert job_key(a) == job_key(Job("other name", "math:comb", (5, 2)))
    assert job_key(a) != job_key(b)
    # the digest of the project's code is part of it: a sweep job's module and what it imports
    ring = Job("r", "sim.system.run:run_config", (), {"gpus": 2})
    from hw.export import source_digest
    assert source_digest("sim.system.run") != source_digest("math")
    assert job_key(ring) != job_key(Job("r", "sim.system.run:run_config", (), {"gpus": 4}))


@pytest.mark.parametrize("job, message", [
    (dict(name="j", function="math.comb"), r"^job 'j': function must be 'module:function', "
                                           r"not 'math.comb'$"),
    (dict(name="j", function="math:comb", args=(object(),)),
     r"^job 'j': arguments must be JSON values"),
])
def test_bad_jobs_are_refused(job, message):
    with pytest.raises(ValueError, match=message):
        Job(**job)


def test_job_names_must_be_unique(tmp_path):
    with pytest.raises(ValueError, match=r"given more than once: \['a'\]$"):
        run_jobs([Job("a", "math:comb", (1, 1)), Job("a", "math:gcd", (1, 1))],
                 cache=tmp_path, progress=False)


def test_an_unreadable_cache_entry_is_a_miss(tmp_path, capsys):
    """An entry cut short (a run killed mid-write, before writes were atomic) is not an
    error: its job runs again, one line names the entry, and the new result replaces it."""
    job = JOBS[0]
    entry = tmp_path / f"{job_key(job)}.json"
    entry.write_text('{"unterminated": "str')
    out = run_jobs([job], cache=tmp_path, workers=1, progress=False)
    assert out["c52"].ok and out["c52"].value == 10 and not out["c52"].cached
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if line.startswith("t3:")] == [
        f"t3: the cached result {entry} of job c52 cannot be read (JSONDecodeError: "
        f"Unterminated string starting at: line 1 column 18 (char 17)): running the job again"]
    assert json.loads(entry.read_text()) == 10
    assert run_jobs([job], cache=tmp_path, workers=1, progress=False)["c52"].cached


def test_a_write_is_whole_or_not_at_all(tmp_path, monkeypatch):
    """A write that fails before its rename leaves the old file as it was and no temporary
    file behind."""
    import os
    from sim.sweep import write_atomic
    path = tmp_path / "entry.json"
    write_atomic(path, "1")
    assert path.read_text() == "1" and oct(path.stat().st_mode & 0o777) == "0o644"

    def killed(src, dst):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "2" * 100_000)
    assert path.read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.json"]
