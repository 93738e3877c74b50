"""Independent simulation jobs on Dask, with a result cache: the machinery behind sweeps.

A :class:`Job` names a function by ``"module:function"`` (so that any worker process can import
it) and its arguments.  :func:`run_jobs` runs a list of them on a Dask cluster — a
``LocalCluster`` of ``workers`` processes on this machine by default, or the scheduler at
``scheduler`` — with a progress bar over jobs, and returns one :class:`Outcome` per job:

* a job that raises is reported (``ok`` false, ``error`` = the exception's one-line text) and
  the others' results are kept;
* with ``cache``, a folder, each job's result is stored as JSON under its *key*: the function,
  its arguments and the source digest of the function's module and every project module it
  imports (:func:`hw.export.source_digest`: the hardware and the testbench), so a re-run only
  runs what changed or failed.  An entry is written whole or not at all (a temporary file,
  then a rename), and one that cannot be read (a disk that filled, a hand that edited it) is a
  miss: its job runs again, with one line on standard error naming the entry, and its result
  replaces it.

Results must be JSON values (what ``t3 run --json`` writes).
"""

import contextlib
import dataclasses
import hashlib
import importlib
import json
import os
import sys
import tempfile
from pathlib import Path


__all__ = ["Job", "Outcome", "run_jobs", "job_key", "write_atomic"]


@dataclasses.dataclass(frozen=True)
class Job:
    """``name`` (unique in a sweep), ``function`` (``"module:function"``), its positional
    ``args`` and keyword ``kwargs`` (JSON values)."""
    name: str
    function: str
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        module, sep, attr = self.function.partition(":")
        if not (sep and module and attr.isidentifier()):
            raise ValueError(f"job {self.name!r}: function must be 'module:function', "
                             f"not {self.function!r}")
        try:
            json.dumps([list(self.args), self.kwargs])
        except TypeError as e:
            raise ValueError(f"job {self.name!r}: arguments must be JSON values ({e})") from None


@dataclasses.dataclass
class Outcome:
    """What became of a job: ``ok`` and ``value``, or ``error`` (one line); ``cached`` when
    the value came from the cache."""
    job: Job
    ok: bool
    value: object = None
    error: str = ""
    cached: bool = False


def write_atomic(path, text):
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename:
    a reader sees the old file or the new one, never a part (a run killed mid-write leaves
    the old one, or none)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w" if isinstance(text, str) else "wb") as f:
            f.write(text)
        os.chmod(tmp, 0o644)                    # as a file written in place (mkstemp: 0600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _resolve(function):
    module, _, attr = function.partition(":")
    return getattr(importlib.import_module(module), attr)


def job_key(job):
    """The cache key of ``job``: function, arguments and the source of the code it runs."""
    from hw.export import source_digest
    module = job.function.partition(":")[0]
    text = json.dumps([job.function, list(job.args), job.kwargs, source_digest(module)],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _run_one(function, args, kwargs):
    """Worker side: the job's value, or the exception as one line (never raises)."""
    try:
        return True, _resolve(function)(*args, **kwargs)
    except Exception as e:                          # noqa: BLE001 - reported, not lost
        message = str(e).splitlines()[0] if str(e) else ""
        return False, f"{type(e).__name__}: {message}" if message else type(e).__name__


def run_jobs(jobs, *, cache=None, scheduler=None, workers=2, progress=True):
    """Run ``jobs``; returns ``{name: Outcome}`` in the jobs' order (see the module doc)."""
    from dask.distributed import Client, LocalCluster, as_completed
    jobs = list(jobs)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        twice = sorted(n for n in set(names) if names.count(n) > 1)
        raise ValueError(f"job names must be unique; given more than once: {twice}")
    outcomes, keys = {}, {}
    cache = Path(cache) if cache is not None else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    todo = []
    for job in jobs:
        if cache is not None:
            keys[job.name] = key = job_key(job)
            stored = cache / f"{key}.json"
            if stored.exists():
                try:
                    value = json.loads(stored.read_text())
                except (OSError, ValueError) as e:
                    print(f"t3: the cached result {stored} of job {job.name} cannot be read "
                          f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}): "
                          f"running the job again", file=sys.stderr)
                else:
                    outcomes[job.name] = Outcome(job, True, value, cached=True)
                    continue
        todo.append(job)
    if todo:
        cluster = None
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
        client = Client(scheduler if scheduler is not None else cluster)
        try:
            futures = {client.submit(_run_one, j.function, list(j.args), j.kwargs,
                                     key=f"{j.name}-{keys.get(j.name, '')}", pure=False): j
                       for j in todo}
            bar = None
            if progress:
                from tqdm import tqdm
                bar = tqdm(total=len(todo), desc="jobs", unit="job", file=sys.stderr)
            for future in as_completed(futures):
                job = futures[future]
                try:
                    ok, value = future.result()
                except Exception as e:              # noqa: BLE001 - a worker lost, say
                    ok, value = False, f"{type(e).__name__}: {e}"
                if ok:
                    try:
                        text = json.dumps(value)
                    except TypeError as e:
                        ok, value = False, f"the result is not a JSON value ({e})"
                if ok:
                    outcomes[job.name] = Outcome(job, True, value)
                    if cache is not None:
                        write_atomic(cache / f"{keys[job.name]}.json", text)
                else:
                    outcomes[job.name] = Outcome(job, False, error=value)
                if bar is not None:
                    bar.update()
                    bar.set_postfix_str(f"{job.name}: {'ok' if ok else 'FAILED'}")
            if bar is not None:
                bar.close()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    return {name: outcomes[name] for name in names}
