"""What a recorded run ran: the key of the paper's records (``docs/results/``).

A run of the ring is decided by four things, and its key is their digests:

``verilog``
    the Verilog of the ring it simulated (:func:`hw.export.verilog_text` of the ring that
    :func:`sim.system.run.run_plan` builds for it: every node, engine and link, sized for the
    run);
``stimulus``
    everything the host put into that ring: every register write and read, every program and
    data beat loaded into the engines, every start and read-back, in order, with the inputs
    that the transport takes itself (fault injection, a GPU's reset, the timeline's period).
    It is computed without a simulator: the host's phase script
    (:class:`sim.system.host.RingHost`), built from the testbench's configuration as
    :func:`sim.system.testbench.run_system` builds it, runs against a transport that answers
    at once and writes down what it is asked (:class:`DryRing`).  The script does not branch
    on what it reads (counters and read-back are results, and a phase that does not finish
    ends the run), so what it asks is what it asks of the simulated ring;
``simulator``
    the simulator, its version and every build option
    (:func:`sim.harness.runner.build_settings`: Verilator's options, the C++ model's ``make``
    flags and optimisation, the build style);
``harness``
    the code, comments and docstrings left out, of the modules that decide a run's cycles and
    the figures taken from its counters besides the stimulus: :data:`HARNESS` (the cocotb
    transport and its AXI4-Lite master, the host's phase script, the counters' arithmetic),
    and for Figure 17 its series (:data:`FIGURE17_HARNESS`).

A change that leaves all four equal (a refactor of the driver, the workload generator or the
hardware's Python that moves no gate, a new option, a comment) leaves the records valid; one
that moves any of them makes the runs it moves stale, and :func:`moved` says which input moved
and for which runs.  cocotb's, Amaranth's and numpy's versions are written beside the key, not
in it: Amaranth's and numpy's output is in the Verilog and the stimulus, and cocotb is a
dependency the project takes at any 2.x version, which a key would turn into a property of
the day it was installed.

The digests of the Verilog (per ring build key) and the stimulus (per run, under the source
of the host's code) are cached in :func:`sim.harness.runner.build_cache_dir`, in
``run-digests.json``: a first check after a change of the hardware exports each ring once
(about a minute a ring, one process per core), later ones take seconds.  A record's stamp
(:func:`source_stamp`) spares even those while its sources are the ones it was checked on.
"""

import ast
import asyncio
import fcntl
import functools
import hashlib
import json
import os
from pathlib import Path

from sim.sweep import write_atomic


__all__ = ["HARNESS", "FIGURE17_HARNESS", "code_digest", "harness_digests", "simulator",
           "DryRing", "stimulus_digest", "verilog_digest", "case_plan", "run_key",
           "record_key", "moved", "provenance", "source_stamp"]


#: The modules that decide a paper run's cycles and figures besides its Verilog and its
#: stimulus: the testbench's transport (:class:`sim.system.testbench.CocotbRing`: resets,
#: the start pulse, the bulk port's timing), its AXI4-Lite master (the configuration
#: accesses' cycles), the host's phase script (when it reads which counters) and the
#: arithmetic that turns counters into the recorded figures.
HARNESS = ("sim.harness.axil", "sim.system.host", "sim.system.results",
           "sim.system.testbench")

#: Figure 17's: :data:`HARNESS` and the series it draws from the timeline.
FIGURE17_HARNESS = HARNESS + ("sim.system.figure17",)


def _short(h):
    return h.hexdigest()[:20]


def code_digest(path):
    """A module's code without comments, docstrings and layout (its syntax tree), digested."""
    tree = ast.parse(Path(path).read_text(), str(path))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return _short(hashlib.sha256(ast.dump(tree).encode()))


def harness_digests(modules=HARNESS):
    """``{module: code_digest}`` of ``modules`` (dotted names of the project's modules)."""
    import importlib.util
    out = {}
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise ValueError(f"harness module {name!r} not found")
        out[name] = code_digest(spec.origin)
    return out


def simulator(sim=None, cxx_opt=None):
    """The simulator part of the key: :func:`sim.harness.runner.build_settings` of ``sim``
    (default: :func:`sim.harness.runner.default_sim`) with the rings' C++ optimisation
    (default :data:`sim.system.run.CXX_OPT`)."""
    from sim.harness.runner import build_settings, default_sim
    from sim.system.run import CXX_OPT
    sim = sim or default_sim()
    return build_settings(sim, cxx_opt or CXX_OPT if sim == "verilator" else None)


def provenance():
    """The versions written beside a key, not in it (see the module's doc)."""
    from importlib.metadata import version
    return {name: version(name) for name in ("amaranth", "cocotb", "numpy")}


# --- the digest cache ------------------------------------------------------------------------

def _cache_path():
    from sim.harness.runner import build_cache_dir
    return build_cache_dir() / "run-digests.json"


class _Cache:
    """``{"verilog": {build key: digest}, "stimulus": {key: digest}}`` in one JSON file,
    read once and written back (under a lock, merged with what other processes wrote) when
    something was added.  An unreadable file is an empty cache."""

    def __init__(self):
        self.path = _cache_path()
        self.data = self._read()
        self.added = {"verilog": {}, "stimulus": {}}

    def _read(self):
        try:
            data = json.loads(self.path.read_text())
            if isinstance(data, dict):
                return {kind: dict(data.get(kind) or {}) for kind in ("verilog", "stimulus")}
        except (OSError, ValueError):
            pass
        return {"verilog": {}, "stimulus": {}}

    def get(self, kind, key):
        return self.data[kind].get(key)

    def put(self, kind, key, value):
        self.data[kind][key] = self.added[kind][key] = value

    def save(self):
        if not any(self.added.values()):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read()
            for kind, new in self.added.items():
                data[kind].update(new)
            write_atomic(self.path, json.dumps(data, indent=0, sort_keys=True))
        self.added = {"verilog": {}, "stimulus": {}}


# --- the Verilog ------------------------------------------------------------------------------

def verilog_digest(plan, cache=None):
    """The digest of the ring's Verilog of ``plan`` (a :class:`sim.system.run.RunPlan`): from
    the cache, else from a finished build of the same build key, else exported."""
    from hw.export import verilog_text
    from sim.harness.runner import cached_builds
    cache = cache or _Cache()
    digest = cache.get("verilog", plan.key)
    if digest is None:
        built = cached_builds(plan.top, plan.key)
        text = built[0].read_text() if built else verilog_text(plan.make(), plan.top)
        digest = _short(hashlib.sha256(text.encode()))
        cache.put("verilog", plan.key, digest)
    return digest


# --- the stimulus -----------------------------------------------------------------------------

class DryRing:
    """A transport of :class:`sim.system.host.RingHost` (see there) that answers every call
    at once (reads with zeros, every phase finished) and digests what it is asked, in order:
    the stimulus of a run (:func:`stimulus_digest`)."""

    def __init__(self, gpus):
        self.gpus = gpus
        self.hash = hashlib.sha256()
        self.calls = 0
        self.read_back = False
        self.simulated_cycles = self.out_of_reset = 0

    def _note(self, *call):
        self.hash.update(json.dumps(call, separators=(",", ":")).encode() + b"\n")
        self.calls += 1

    def cfg_ports(self, gpus):
        ring = self

        class Ports:
            async def write(self, batches):
                ring._note("write", batches)

            async def read(self, batches):
                ring._note("read", batches)
                return [[0] * len(batch) for batch in batches]
        return Ports()

    async def reset(self):
        self._note("reset")

    async def load(self, beats):
        self._note("load", beats)

    async def read_local(self, first, count):
        self._note("read_local", first, count)
        self.read_back = True
        return [[0] * count for _ in range(self.gpus)]

    async def start_and_wait(self, name, limit):
        self._note("start", name, limit)
        return None

    async def sleep(self, cycles):
        return None

    def ring_counters(self, names):
        return None

    def report(self):
        return {}

    @property
    def digest(self):
        return _short(self.hash.copy())


@functools.lru_cache(maxsize=2)
def _workload(args):
    """The workload of ``args`` (JSON: spec, GPUs, widths, seed), kept for the next run of the
    same case (a case's four runs share their inputs; the host only reads the workload)."""
    from hw.params import T3Params
    from sim.system.workload import GemmSpec, Workload
    spec, gpus, params, seed = json.loads(args)
    return Workload(GemmSpec(**spec), gpus, T3Params(**params), seed=seed)


def _stimulus(tb):
    """Run the host's phase script of the testbench configuration ``tb`` against a
    :class:`DryRing`; returns the ring (its digest)."""
    from hw.params import T3Params
    from l2.config import L2Config
    from sim.system.host import RingHost
    from sim.system.run import SYSTEM_L2_CONFIG
    from system.engine.config import EngineParams
    from system.node import NodeParams
    # as sim.system.testbench.run_system builds its host
    params = T3Params(**tb["params"])
    nparams = NodeParams.from_dict(tb["nparams"])
    wl = _workload(json.dumps([tb["spec"], tb["gpus"], tb["params"], tb.get("seed", 1)],
                              sort_keys=True))
    ring = DryRing(tb["gpus"])
    # what the transport takes itself, beside what the host asks of it
    ring._note("transport", {k: tb.get(k) for k in ("faults", "reset_gpu", "recover",
                                                     "timeline")})
    host = RingHost(ring, params, nparams, EngineParams(**tb["engines"]), wl, tb["config"],
                    topology=tb.get("topology", "ring"), collective=tb.get("collective", "ring"))
    if tb.get("bandwidth"):
        host.bandwidth = tuple(tb["bandwidth"])
    host.charge_headers = tb.get("charge_headers", True)
    if nparams.l2 is not None:
        host.driver.set_l2(L2Config(**tb["l2_config"]) if tb.get("l2_config") else
                           SYSTEM_L2_CONFIG)
    try:
        asyncio.run(host.run())
    except AssertionError:
        # the check of the read-back (zeros here) is the script's last step: the stimulus is
        # whole if the read-back was asked for
        if not ring.read_back:
            raise
    return ring


def _stimulus_key(tb):
    from hw.export import source_digest
    from importlib.metadata import version
    text = json.dumps([tb, source_digest("sim.system.host"),
                       source_digest("sim.system.workload"), version("numpy"),
                       version("ml_dtypes")], sort_keys=True, default=str)
    return _short(hashlib.sha256(text.encode()))


def stimulus_digest(tb, cache=None):
    """The digest of what the host puts into the ring for the testbench configuration ``tb``
    (:attr:`sim.system.run.RunPlan.tb`), cached under the source of the host's code, the
    workload's (its inputs and partial outputs) and the configuration."""
    cache = cache or _Cache()
    key = _stimulus_key(tb)
    digest = cache.get("stimulus", key)
    if digest is None:
        digest = _stimulus(tb).digest
        cache.put("stimulus", key, digest)
    return digest


# --- runs and records -------------------------------------------------------------------------

def case_plan(case, config, scale, sim=None, seed=1, timeline=None):
    """The :class:`sim.system.run.RunPlan` of a paper run (as :func:`sim.system.cases.run_case`
    and :func:`sim.system.figure17.run_timeline` run it)."""
    from sim.system.cases import case_setup
    from sim.system.run import preset_setup, run_plan
    spec, gpus, _ = case_setup(case, scale)
    return run_plan(spec, gpus, config, sim=sim, seed=seed, timeline=timeline, check=False,
                    **preset_setup(spec))


def run_key(case, config, scale, sim=None, seed=1, timeline=None, cache=None):
    """``{"ring", "verilog", "stimulus"}`` of a paper run today."""
    own = cache is None
    cache = cache or _Cache()
    plan = case_plan(case, config, scale, sim, seed, timeline)
    out = {"ring": plan.top, "verilog": verilog_digest(plan, cache),
           "stimulus": stimulus_digest(plan.tb, cache)}
    if plan.verilator_args:
        # a ring's own simulator options (a link layer's, sim.system.run.ring_verilator_args)
        out["verilator_args"] = list(plan.verilator_args)
    if own:
        cache.save()
    return out


def _verilog_job(args):
    """In a worker: ``(build key, Verilog digest)`` of the ring of the run ``args``."""
    plan = case_plan(*args)
    return plan.key, verilog_digest(plan, _Cache())


def _stimulus_job(args):
    """In a worker: ``(stimulus key, digest)`` of the run ``args``."""
    plan = case_plan(*args)
    return _stimulus_key(plan.tb), _stimulus(plan.tb).digest


def _fill(runs, sim, cache, progress, workers):
    """Compute the digests of ``runs`` that ``cache`` lacks, each ring's Verilog once, on
    ``workers`` processes (a ring's export is about a minute; a run's stimulus a second)."""
    rings, stimuli = {}, {}
    for case, config, scale, timeline in sorted(runs.values()):
        args = (case, config, scale, sim, 1, timeline)
        plan = case_plan(*args)
        if cache.get("verilog", plan.key) is None:
            rings.setdefault(plan.key, args)
        key = _stimulus_key(plan.tb)
        if cache.get("stimulus", key) is None:
            stimuli.setdefault(key, args)
    jobs = [(_verilog_job, "verilog", a) for a in rings.values()] + \
        [(_stimulus_job, "stimulus", a) for a in stimuli.values()]
    if not jobs:
        return
    done = 0
    if workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx) as pool:
            futures = {pool.submit(fn, args): kind for fn, kind, args in jobs}
            for future in as_completed(futures):
                cache.put(futures[future], *future.result())
                done += 1
                if progress is not None:
                    progress(done, len(jobs))
    else:
        for fn, kind, args in jobs:
            cache.put(kind, *fn(args))
            done += 1
            if progress is not None:
                progress(done, len(jobs))
    cache.save()


def record_key(runs, sim=None, harness=HARNESS, progress=None, workers=None):
    """The key of a record of ``runs``, ``{label: (case, config, scale, timeline)}``: each
    run's :func:`run_key`, the :func:`simulator` and the :func:`harness_digests`.  The
    digests the cache lacks are computed first, on ``workers`` processes (default: one a
    core); ``progress(done, total)`` is told of each."""
    from sim.harness.runner import default_sim
    sim = sim or default_sim()
    cache = _Cache()
    try:
        _fill(runs, sim, cache, progress, workers or os.cpu_count() or 1)
        out = {label: run_key(case, config, scale, sim, timeline=timeline, cache=cache)
               for label, (case, config, scale, timeline) in sorted(runs.items())}
    finally:
        cache.save()
    return {"simulator": simulator(sim), "harness": harness_digests(harness), "runs": out,
            "stamp": source_stamp(harness, sim)}


def source_stamp(harness=HARNESS, sim=None):
    """A digest of the source of everything a record's key is made from (the project's
    modules a paper run and its key import, hardware included, and ``harness``), of
    Amaranth's, numpy's and ml_dtypes's versions and of the :func:`simulator`: while it is
    what a record was stamped with, the record's key is today's without computing it (same
    sources and versions make the same Verilog and stimulus).  A record is stamped when it is
    made and when a full check finds it current (``t3 docs``)."""
    from importlib.metadata import version
    from hw.export import hardware_modules
    modules = {}
    for top in ("sim.system.cases", "sim.system.testbench", "sim.system.figures", __name__,
                *harness):
        modules.update(hardware_modules(top))
    h = hashlib.sha256()
    for name, path in sorted(modules.items()):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(json.dumps([simulator(sim), [version(n) for n in ("amaranth", "numpy",
                                                             "ml_dtypes")]]).encode())
    return _short(h)


def _names(labels, limit=4):
    labels = sorted(labels)
    return ", ".join(labels[:limit]) + (f" and {len(labels) - limit} more"
                                        if len(labels) > limit else "")


def moved(stored, today):
    """What moved between the key a record was made with (``stored``) and today's
    (``today``, of the same runs): one phrase per input that moved, naming it (``[]``: the
    record is current)."""
    out = []
    if stored.get("simulator") != today["simulator"]:
        old, new = stored.get("simulator") or {}, today["simulator"]
        what = [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
                if old.get(k) != new.get(k)]
        out.append("the simulator or its build options (" + "; ".join(what) + ")")
    old_h = stored.get("harness") or {}
    for name in sorted(set(old_h) | set(today["harness"])):
        if old_h.get(name) != today["harness"].get(name):
            out.append(f"the harness module {name}'s code")
    runs = stored.get("runs") or {}
    missing = sorted(set(today["runs"]) - set(runs))
    if missing:
        out.append(f"no key for {len(missing)} runs ({_names(missing)})")
    by_ring = {}
    stimulus = []
    for label, now in today["runs"].items():
        was = runs.get(label)
        if was is None:
            continue
        if was.get("verilog") != now["verilog"]:
            by_ring.setdefault(now["ring"], []).append(label)
        if was.get("stimulus") != now["stimulus"]:
            stimulus.append(label)
    for ring, labels in sorted(by_ring.items()):
        out.append(f"the Verilog of {ring} ({len(labels)} runs: {_names(labels)})")
    if stimulus:
        out.append(f"the host's programs and register writes ({len(stimulus)} runs: "
                   f"{_names(stimulus)})")
    return out
