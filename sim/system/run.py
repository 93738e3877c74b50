"""Run one configuration of the system on a simulator (the ``t3 run`` and ``t3 compare``
commands, ``t3 bench system`` and the system tests use this)."""

import dataclasses
import math
import os
import threading
from pathlib import Path

from hw.params import T3Params, check_int
from l2.config import L2Config
from system.engine.config import EngineParams
from system.ring import MAX_GPUS
from system.spec import LINK_CHARGES_HEADERS, LINK_LATENCY, PAPER_DMA_BUFFER, \
    PAPER_DRAM_SCHEDULER, PAPER_ENGINE, PAPER_L2, RingSpec, check_topology, engine_params_for, \
    node_for, paper_memory_rows, with_linklayer
from system.spec import memory_rows_for as ring_memory_rows
from sim.harness.runner import NO_DFG, check_verilator_cxx, default_sim, design_key, \
    run_folder, run_for_result
from sim.system.workload import LINK_BANDWIDTH, SCALE, Workload


__all__ = ["check_wave", "run_config", "check_config", "describe_scale",
           "ring_build", "idle_rate", "run_plan", "RunPlan", "ring_verilator_args",
           "CXX_OPT", "DEFAULT_CXX_OPT", "WAVES_CXX_OPT", "run_formats", "workload_memory_rows",
           "preset_setup", "PAPER_L2_BYTES", "L2_HIT_FRACTION", "L2_HIT_LATENCY",
           "L2_BANK_CYCLES", "SYSTEM_L2_CONFIG", "paper_l2_config"]


def run_formats(spec):
    """The element types a run of ``spec`` builds its ring's adders for: the workload's only.
    Every adder lane is logic the simulator evaluates every cycle, used or not (the 4-GPU
    default run's engines ran at about 63,000 cycles/s with fp16 lanes only, 52,000-55,000
    with fp32 lanes too); a ring is built, and cached, per type."""
    return (spec.dtype,)


#: The Verilator model's C++ optimisation for the rings by default: at ``-O2`` the 4-GPU ring
#: ran about 4.5 times faster than at ``-O0`` (``docs/system.md``); ``-O3`` runs the idle ring
#: 3 % faster again (74,900 against 72,400 cycles/s) in the same build time (44 s).
DEFAULT_CXX_OPT = "-O3"

#: The rings' C++ optimisation in this process: ``T3_CXX_OPT`` (one word) overrides
#: :data:`DEFAULT_CXX_OPT`; the test suite builds at ``-O1`` (``tests/conftest.py``).
CXX_OPT = os.environ.get("T3_CXX_OPT") or DEFAULT_CXX_OPT

#: A build with waves compiles its per-cycle code at ``-O1`` unless ``T3_CXX_OPT`` or the
#: caller says otherwise: the trace's code is half of such a model's C++, and the 2-GPU ring
#: with a wave of one GPU built in 71 s at ``-O1`` against 118 s at ``-O3`` and ran at 9,300
#: to 9,700 cycles/s against 10,000 (writing the wave is most of the time; ``docs/system.md``).
WAVES_CXX_OPT = "-O1"

#: The paper's L2 is 16 MB (Table 1).
PAPER_L2_BYTES = 16 << 20

#: An unloaded L2 hit against an unloaded DRAM read, as a GPU's: Accel-Sim's QV100
#: configuration puts an L2 hit at its 160-cycle ROP latency and a miss 100 DRAM cycles later
#: (0.62); microbenchmarks of V100 measure 193 against 375 cycles (0.51).  Between the two.
L2_HIT_FRACTION = 0.55

#: The L2's ``hit_latency`` register in the system's nodes: an unloaded hit is answered at
#: the node's compute port ``L2_HIT_LATENCY + 1`` cycles after its handshake (the port's
#: register slice), 14, and an unloaded miss 25 (a closed row's activate and read in the
#: HBM, the node's slices and the L2's lookup and fill): 0.56 of it.  Measured, and the
#: relation checked, by ``tests/test_system_unit.py``.
L2_HIT_LATENCY = 13

#: Cycles a bank of the system's L2 is busy per cached access: 1.  Its four banks take up to
#: four accesses a cycle; the compute port brings one, so banks never limit the CUs (the
#: paper's 64-bank L2 serves several times HBM's bandwidth).
L2_BANK_CYCLES = 1


#: The L2 configuration of the system's nodes when a run names none: every set and way,
#: :data:`L2_HIT_LATENCY`, :data:`L2_BANK_CYCLES`.
SYSTEM_L2_CONFIG = L2Config(hit_latency=L2_HIT_LATENCY, bank_cycles=L2_BANK_CYCLES)


def paper_l2_config(spec, gpus, params=None):
    """The :class:`l2.config.L2Config` of a Table 2 preset's run (``spec.name``): the sets and
    ways of :data:`PAPER_L2` that keep the paper's ratio of a ring step's working set to its
    16 MB L2.  The working set is what a ring step touches: all of ``A``, ``B``'s columns of
    one chunk and the chunk's output, ``M K + K H / TP + M H / TP`` elements of Table 2; the
    scaled one is ``A``'s and a chunk's ``B`` panels
    (:meth:`sim.system.workload.Workload.input_beats`) and a chunk of the scaled output.  Of
    128, 64 or 32 sets of 1 to 16 ways, the capacity nearest that ratio's (by their ratio;
    more sets on a tie).  A workload that is not a preset gets every set and way."""
    from sim.system.workload import PRESETS, Workload
    if spec.name not in PRESETS:
        return SYSTEM_L2_CONFIG
    params = params or T3Params()
    case = PRESETS[spec.name]
    tokens, hidden, k = case["paper_mnk"]
    e = spec.elem_bytes
    tp = case["tp"]
    paper_set = (tokens * k + k * hidden / tp + tokens * hidden / tp) * e
    a, b = Workload(spec, gpus, params).input_beats()
    model_set = (a + b / gpus) * params.beat_bytes + spec.m * spec.n / gpus * e
    beats = PAPER_L2_BYTES * model_set / paper_set / params.beat_bytes
    sets, ways = min(((PAPER_L2.sets >> i, w) for i in range(3)
                      for w in range(1, PAPER_L2.ways + 1)),
                     key=lambda sw: (abs(math.log(sw[0] * sw[1] / beats)), -sw[0]))
    return dataclasses.replace(SYSTEM_L2_CONFIG, sets_used=sets, ways_used=ways)


def preset_setup(spec, gpus=None):
    """``run_config``'s ring settings for a Table 2 preset's ``spec`` on ``gpus`` (default:
    its TP degree): the paper rings' memory, engines and L2 (:func:`paper_l2_config`) and the
    scaled link latency (:func:`sim.system.workload.link_latency_for`)."""
    from sim.system.workload import PRESETS, link_latency_for
    gpus = gpus or PRESETS[spec.name]["tp"]
    return {"memory_rows": paper_memory_rows(gpus), "latency": link_latency_for(spec),
            "engines": PAPER_ENGINE, "l2": PAPER_L2, "dma_buffer": PAPER_DMA_BUFFER,
            "dram_scheduler": PAPER_DRAM_SCHEDULER, "l2_config": paper_l2_config(spec, gpus)}


def workload_memory_rows(gpus, spec, config="t3"):
    """The HBM rows per bank a run of workload ``spec`` (a :class:`sim.system.workload.
    GemmSpec`) in ``config`` on ``gpus`` gets when the caller names none: the ring's
    (:func:`system.spec.memory_rows_for`: 8 up to 8 GPUs, 16 up to 16, 32 up to 32, 64 up to
    64), or, where its buffers (:func:`sim.system.configure.allocate`) do not fit in that, the
    fewest twice as many that hold them (the default workload's K balances its GEMM at the
    paper's GPU's rate against its RS, :func:`sim.system.workload.balanced_k`: 16 rows from 5
    GPUs).  The model's memory costs simulation time by its size (each of its banks is read
    every cycle), so a ring gets no more than it needs."""
    from sim.system.configure import allocate
    from sim.system.driver import Driver
    from sim.system.workload import Workload
    rows = ring_memory_rows(gpus)
    params = T3Params()
    while True:
        try:
            allocate(Driver(params, node_for(gpus, memory_rows=rows, formats=run_formats(spec)),
                            gpus), Workload(spec, gpus, params), config)
            return rows
        except ValueError:
            if rows >= 4096:
                return rows         # the driver's checks name what does not fit
            rows *= 2


def engines_for(eparams, spec):
    """``eparams``, streaming (:attr:`system.engine.config.EngineParams.streaming`) when the
    workload ``spec`` streams its WGs' panels in K slices (:attr:`sim.system.workload.GemmSpec.
    k_slice`): the ``k_slices`` register exists only in an engine built for it."""
    if spec.k_slice is not None and not eparams.streaming:
        return dataclasses.replace(eparams, streaming=True)
    return eparams


def describe_scale(spec, gpus, latency=LINK_LATENCY):
    """One line: how the run is scaled from the paper's system, and its GEMM : RS estimate."""
    est = Workload.estimate(spec, gpus, T3Params())
    num, den = LINK_BANDWIDTH
    return (f"HBM, link and CU throughput / {SCALE:g} (HBM 16 B/cycle, link {num}/{den} beat = "
            f"{T3Params().beat_bytes * num / den:.1f} B/cycle, {spec.flops:.0f} flop/cycle, "
            f"link latency {latency}, {spec.cus} CUs); GEMM : RS estimate "
            f"{est['ratio']:.2f}")


def read_back_beats(spec, gpus, params, slots):
    """Beats the host reads back from every GPU after a run: its output ``C`` and ``slots``
    chunks of ``R`` (:func:`read_back_slots`)."""
    out_beats = spec.m * spec.n * spec.elem_bytes // params.beat_bytes
    return out_beats + out_beats // gpus * slots


def check_config(spec, gpus, config, params, nparams, eparams=None, l2_config=None,
                 topology="ring", collective="ring"):
    """Everything the run will program, checked in Python first (the workload against the
    ring, every driver call of every phase, and with ``eparams`` the engines' GEMM programs
    against their registers and descriptors): a refused configuration raises ``ValueError``
    naming the field before any simulator starts."""
    from sim.system.driver import Driver
    from sim.system.configure import (CONFIGS, ISOLATED_RS, allocate, configure_all_reduce,
                                      configure_all_to_all, configure_direct, configure_fused,
                                      configure_isolated_rs, map_direct_windows,
                                      map_ring_windows)
    from sim.system.workload import Workload
    if config not in CONFIGS + (ISOLATED_RS,):
        raise ValueError(f"config must be one of {CONFIGS}, not {config!r}")
    check_int("gpus", gpus, 2, MAX_GPUS)
    wl = Workload(spec, gpus, params)
    if order_free(collective, topology) and not wl.order_free():
        raise ValueError(f"collective {collective}: the partials' sums pass {spec.dtype}'s exact "
                         f"integers (a smaller k, or fp32), so their order would matter")
    driver = Driver(params, for_collective(nparams, gpus, collective, topology), gpus,
                    topology=topology)
    layout = allocate(driver, wl, config)
    if nparams.l2 is not None:
        driver.set_l2(l2_config or SYSTEM_L2_CONFIG)
    elif l2_config is not None:
        raise ValueError("l2_config: the nodes have no L2 (l2 is None)")
    policy = "MCA" if config == "t3-mca" else "ROUND_ROBIN"
    direct = direct_collective(collective, topology)
    if direct and config == "sequential":
        map_direct_windows(driver, wl)
    elif direct:
        {"direct": configure_direct, "all-to-all": configure_all_to_all,
         "all-reduce": configure_all_reduce}[collective](driver, wl, layout, policy)
    elif config == ISOLATED_RS and collective == "ring":
        configure_isolated_rs(driver, wl, layout)
    elif config != "sequential":
        configure_fused(driver, wl, layout, policy, all_reduce=collective == "all-reduce")
    map_ring_windows(driver, wl, "R")
    map_ring_windows(driver, wl, "C")
    if eparams is not None:
        from sim.system.driver import REMOTE_SPACE
        from system.engine.config import desc_beats, engine_registers
        from sim.system.programs import gemm_program
        from system.engine.program import pack_wg
        regs = engine_registers(params, eparams)
        mode = engine_mode(config, collective, topology)
        # the engine's data memory holds the partial output and, after it, the read-back (of
        # the all-to-all and T3's all-reduce on the ring: C and R)
        out_beats = spec.m * spec.n * spec.elem_bytes // params.beat_bytes
        back = read_back_beats(spec, gpus, params,
                               read_back_slots(config, collective, topology, gpus))
        if out_beats + back > eparams.local_beats:
            raise ValueError(f"the engines' local_beats {eparams.local_beats} cannot hold a "
                             f"GPU's partial output and its read-back, {out_beats} + {back} "
                             f"beats")
        # the isolated ring RS runs two programs: the output's stores before the phase and
        # the step-1 chunk's tracked stores in it
        programs = [dict(mode="sequential", steps=range(2, gpus + 1)),
                    dict(mode="rs-nmc", steps=[1])] \
            if config == ISOLATED_RS and collective == "ring" else [dict(mode=mode, steps=None)]
        for g, which in ((g, which) for g in range(gpus) for which in programs):
            program = gemm_program(wl, g, layout, which["mode"], REMOTE_SPACE,
                                   free=config == ISOLATED_RS, steps=which["steps"])
            if len(program.wgs) * desc_beats(params) > eparams.local_beats:
                raise ValueError(f"GPU {g}'s engine: {len(program.wgs)} WG descriptors of "
                                 f"{desc_beats(params)} beats exceed its program memory of "
                                 f"local_beats {eparams.local_beats}")
            if "k_slices" in program.registers and not eparams.streaming:
                raise ValueError(f"k_slice {spec.k_slice}: the engines do not stream their "
                                 f"WGs' panels (EngineParams.streaming is False)")
            try:
                for name, value in program.registers.items():
                    regs.word_writes(name, value)   # refuses a value its register cannot hold
                for wg in program.wgs:
                    pack_wg(params, wg)
            except ValueError as error:
                raise ValueError(f"GPU {g}'s engine: {error}") from None


def check_wave(wave, sim, scope=None, gpus=None):
    """The waveform format of ``wave`` (a path whose suffix names it) on ``sim``, or None
    without one; refuses a format the simulator does not write, a scope without a wave, and
    (with ``gpus``) a scope whose first part is not an instance of the ring (``gpuN``,
    ``linkN``; the parts below are checked against the design once it is exported)."""
    from sim.harness.runner import WAVE_FORMATS
    if not wave:
        if scope:
            raise ValueError("wave_scope: needs a wave to write")
        return None
    fmt = Path(wave).suffix.lower().lstrip(".")
    formats = {**WAVE_FORMATS, "amaranth": ("vcd",)}[sim]    # Amaranth's simulator: VCD
    if fmt not in formats:
        raise ValueError(f"wave: {sim} writes {' or '.join(formats).upper()}: the file must "
                         f"end in {' or '.join('.' + f for f in formats)}, not {str(wave)!r}")
    if scope is not None:
        first = str(scope).split(".")[0]
        known = [f"{kind}{g}" for kind in ("gpu", "link") for g in range(gpus or 0)]
        if not scope or any(not part for part in str(scope).split(".")) or \
                (gpus and first not in known):
            raise ValueError(f"wave_scope must be an instance of the ring (gpu0 to "
                             f"gpu{(gpus or 1) - 1}, link0 to link{(gpus or 1) - 1}, and "
                             f"below: gpu1.node.dma), not {scope!r}")
    return fmt


def ring_build(ring):
    """``(top name, make, cache key)`` of ``ring`` (a :class:`system.spec.RingSpec`): the
    simulator builds it once per key."""
    from system.ring import Ring
    eparams = ring.engines
    key = design_key(Ring, ring.params.to_dict(), ring.node.to_dict(), ring.gpus, ring.latency,
                     ring.bandwidth, eparams.to_dict() if eparams else None,
                     ring.charge_headers, *(("faults",) if ring.faults else ()),
                     *((ring.topology,) if ring.topology != "ring" else ()))
    return ring.top, ring.build, key


#: The collectives a run performs after its GEMM: the ring reduce-scatter (any topology), and
#: on a full mesh the direct reduce-scatter (paper section 7.1;
#: :func:`sim.system.configure.configure_direct`) and the all-to-all (sections 7.1 and 7.2;
#: :func:`sim.system.configure.configure_all_to_all`), and on either the whole all-reduce (on
#: a mesh :func:`sim.system.configure.configure_all_reduce`, its reduce-scatter the direct
#: one; on a ring :func:`sim.system.configure.configure_fused` with ``all_reduce``).  The
#: reduce-scatters are followed by the ring's all-gather, the all-to-all by nothing, and the
#: all-reduce holds its all-gather.
COLLECTIVES = ("ring", "direct", "all-to-all", "all-reduce")

#: The collectives that need a full mesh (they send to every GPU).
MESH_COLLECTIVES = ("direct", "all-to-all")


def direct_collective(collective, topology):
    """Whether ``collective`` on ``topology`` sends to every GPU, a remote window per other GPU:
    the mesh's collectives, and the all-reduce on a mesh (its direct reduce-scatter; on a ring
    its reduce-scatter is the ring's)."""
    return collective in MESH_COLLECTIVES or (collective == "all-reduce" and topology == "mesh")


def order_free(collective, topology):
    """Whether the owners add their peers' updates in arrival order, so that only exact sums
    check bit for bit: the direct reduce-scatters (the ring's adds two per element, which IEEE
    addition leaves alike in either order)."""
    return direct_collective(collective, topology) and collective != "all-to-all"


def engine_mode(config, collective, topology):
    """The GEMM program's mode (:func:`sim.system.programs.gemm_program`) of a run."""
    if config == "sequential":
        return "sequential"
    if collective == "all-reduce":
        return "all-reduce" if topology == "mesh" else "ring-all-reduce"
    return collective if collective in MESH_COLLECTIVES else "t3"


def read_back_slots(config, collective, topology, gpus):
    """Slots of ``R`` the host reads back after ``C`` (chunks): after an all-to-all its
    receive slots, after T3's all-reduce on the ring the chunks it all-gathered (``G - 1``
    each); none otherwise."""
    if collective == "all-to-all" or (collective == "all-reduce" and topology == "ring" and
                                      config != "sequential"):
        return gpus - 1
    return 0


def check_collective(collective, topology, gpus, linklayer=False, spec=None):
    """Refuse a collective, or a topology of ``gpus`` GPUs, the system does not run or build,
    naming the field (``linklayer``: whether the nodes have a link layer; ``spec``: the
    workload; :func:`system.spec.check_topology`)."""
    check_topology(topology, gpus, linklayer)
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, not "
                         f"{collective!r}")
    if collective in MESH_COLLECTIVES and topology != "mesh":
        raise ValueError(f"collective {collective} needs a link to every GPU: topology "
                         f"must be mesh, not {topology!r}")
    if order_free(collective, topology) and spec is not None and spec.inputs != "integers":
        # each owner adds its peers' updates in the order they arrive, which the reference
        # cannot know: a floating-point sum depends on it, an exact one not
        raise ValueError(f"collective {collective} is checked bit for bit with integer inputs "
                         f"(inputs 'integers': the owner adds its peers' updates in arrival "
                         f"order, and exact sums are alike in every order), not "
                         f"{spec.inputs!r}")


#: Tracker regions and DMA commands of the nodes of T3's all-reduce on the ring
#: (:func:`sim.system.configure.configure_fused`: up to three for the reduce-scatter, one for
#: the owner's reduced chunk, two for the chunks it passes on; the node has 4).
RING_ALL_REDUCE_REGIONS = 8

#: The DMA's trigger queue of those nodes: a kernel's triggers, which it must hold
#: (``docs/dma.md``), are the reduce-scatter's and the all-gather's, ``2G - 3`` chunks' tiles
#: against the reduce-scatter's ``G - 2`` (580 in Table 2's TP16 cases at scale 1; the
#: node's queue holds 512).
RING_ALL_REDUCE_TRIGGERS = 1024


def for_collective(nparams, gpus, collective, topology):
    """``nparams`` with what ``collective`` needs of the nodes: a remote window per other GPU
    where it sends to every GPU (:func:`direct_collective`), and for the all-reduce on the
    ring :data:`RING_ALL_REDUCE_REGIONS` Tracker regions and DMA commands and a trigger queue
    of :data:`RING_ALL_REDUCE_TRIGGERS`."""
    from dma.config import MAX_REMOTE_WINDOWS
    if collective == "all-reduce" and topology == "ring":
        n = max(nparams.tracker.regions, RING_ALL_REDUCE_REGIONS)
        return dataclasses.replace(
            nparams, tracker=dataclasses.replace(nparams.tracker, regions=n),
            dma=dataclasses.replace(nparams.dma, commands=n, trigger_depth=max(
                nparams.dma.trigger_depth, RING_ALL_REDUCE_TRIGGERS)))
    if not direct_collective(collective, topology):
        return nparams
    if gpus - 1 > MAX_REMOTE_WINDOWS:
        raise ValueError(f"gpus {gpus}: collective {collective} needs a remote window per "
                         f"other GPU, {gpus - 1}, and the DMA has at most "
                         f"{MAX_REMOTE_WINDOWS} (up to {MAX_REMOTE_WINDOWS + 1} GPUs)")
    return dataclasses.replace(nparams, dma=dataclasses.replace(
        nparams.dma, remote_windows=max(nparams.dma.remote_windows, gpus - 1)))


def check_reset(reset_gpu, gpus, config):
    """Refuse a GPU reset the run cannot inject, naming the field."""
    if not isinstance(reset_gpu, dict) or set(reset_gpu) - {"gpu", "phase", "at"}:
        raise ValueError(f"reset_gpu must be {{'gpu': g, 'phase': name, 'at': cycles}}, not "
                         f"{reset_gpu!r}")
    check_int("reset_gpu gpu", reset_gpu.get("gpu"), 0, gpus - 1)
    phases = ("gemm", "rs", "ag", "check") if config == "sequential" else \
        ("gemm_rs", "ag", "check")
    if reset_gpu.get("phase") not in phases:
        raise ValueError(f"reset_gpu phase must be one of {', '.join(phases)} (the phases of "
                         f"{config}), not {reset_gpu.get('phase')!r}")
    check_int("reset_gpu at", reset_gpu.get("at"), 0)


def check_faults(faults, nparams):
    """Refuse a fault setting the ring cannot inject, naming the field; returns the ring's
    port values ``(rate, kinds)`` (``rate``: of :data:`system.link.FAULT_RATE_BITS` bits)."""
    from system.link import FAULT_KINDS, FAULT_RATE_BITS
    if nparams.linklayer is None:
        raise ValueError("faults need the link layer (linklayer=True): without it a fault on "
                         "the link is a wrong result")
    rate = faults.get("rate")
    if not isinstance(rate, (int, float)) or not 2 ** -FAULT_RATE_BITS <= rate <= 0.5:
        raise ValueError(f"faults rate must be a probability per beat from "
                         f"2**-{FAULT_RATE_BITS} to 0.5, not {rate!r}")
    kinds = tuple(faults.get("kinds") or FAULT_KINDS)
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if bad or not kinds:
        raise ValueError(f"faults kinds must be some of {', '.join(FAULT_KINDS)}, not "
                         f"{faults.get('kinds')!r}")
    return (round(rate * (1 << FAULT_RATE_BITS)),
            sum(1 << FAULT_KINDS.index(k) for k in set(kinds)))


def idle_rate(ring, *, sim=None, cycles=20_000, build_dir=None):
    """Simulated cycles per second of ``ring`` (a :class:`system.spec.RingSpec`) alone
    (engines idle, nothing driven): the model's own speed, the limit of any run on it.  The
    ring a run of a workload runs on is its plan's (:attr:`RunPlan.ring`).  Returns the
    result dict of :func:`sim.system.testbench.idle_ring`."""
    import sim.system.testbench as tb
    sim = sim or default_sim()
    top, make, key = ring_build(ring)
    return run_for_result(make, top, tb.__name__, "idle_ring", {"cycles": cycles}, sim,
                          build_dir, cache_key=key, cxx_opt=CXX_OPT,
                          verilator_args=ring_verilator_args(sim, ring.node.linklayer))


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """What a run of :func:`run_config` simulates, decided and checked before anything is
    built: the simulator ``sim``, the ring (its top module ``top``, ``make()`` building it,
    its build cache ``key``; ``ring``, its :class:`system.spec.RingSpec`), the C++ optimisation ``cxx_opt`` of its Verilator model, the
    testbench's configuration ``tb`` (what :func:`sim.system.testbench.run_system` reads,
    less the progress file), the waveform's format (``None``: no waves) and the simulator's
    options beyond every build's (:func:`ring_verilator_args`)."""
    sim: str
    top: str
    make: object
    key: str
    cxx_opt: str
    tb: dict
    ring: RingSpec
    wave_format: object = None
    verilator_args: tuple = ()


def ring_verilator_args(sim, linklayer):
    """Verilator's options for a ring beyond every build's: without the data-flow optimiser
    when its nodes have the link layer (:data:`sim.harness.runner.NO_DFG`), none else."""
    return NO_DFG if sim == "verilator" and linklayer else ()


def run_plan(spec, gpus, config, *, sim=None, seed=1, memory_rows=None, latency=LINK_LATENCY,
             bandwidth=LINK_BANDWIDTH, engines=True, cxx_opt=None, timeline=None,
             mcq_depth=None, l2=None, l2_config=None, geometry=None,
             charge_headers=LINK_CHARGES_HEADERS, linklayer=None, faults=None, reset_gpu=None,
             recover=False, topology="ring", collective="ring", wave=None, wave_scope=None,
             check=True, dma_buffer=None, dram_scheduler=None):
    """The :class:`RunPlan` of :func:`run_config`'s arguments (see there), every argument
    checked: a refused one raises ``ValueError`` naming the field.  ``check=False`` leaves
    out the check of everything the run will program (:func:`check_config`, most of the
    plan's time), for a run known to be valid (a recorded one's key)."""
    sim = sim or default_sim()
    check_int("gpus", gpus, 2, MAX_GPUS)
    if geometry is not None:
        knobs = {"memory_rows": memory_rows, "mcq_depth": mcq_depth, "l2": l2,
                 "dma_buffer": dma_buffer, "dram_scheduler": dram_scheduler}
        given = [name for name, value in knobs.items() if value is not None]
        if given:
            raise ValueError(f"{given[0]}: the nodes are geometry's; give one or the other")
        params, nparams = geometry
        nparams = with_linklayer(nparams, linklayer)
    else:
        params = T3Params()
        nparams = node_for(gpus, memory_rows=memory_rows or workload_memory_rows(gpus, spec,
                                                                                  config),
                           mcq_depth=mcq_depth, l2=l2, formats=run_formats(spec),
                           dma_buffer=dma_buffer, dram_scheduler=dram_scheduler,
                           linklayer=linklayer)
    fault_ports = check_faults(faults, nparams) if faults else None
    eparams = engine_params_for(gpus) if engines is True else engines
    if not isinstance(eparams, EngineParams):
        raise ValueError(f"engines must be True or an EngineParams, not {engines!r}")
    eparams = engines_for(eparams, spec)
    check_collective(collective, topology, gpus, nparams.linklayer is not None, spec)
    ring = RingSpec(gpus=gpus, node=for_collective(nparams, gpus, collective, topology),
                    engines=eparams, topology=topology, latency=latency,
                    bandwidth=tuple(bandwidth), charge_headers=bool(charge_headers),
                    faults=bool(fault_ports), params=params)
    if reset_gpu is not None:
        check_reset(reset_gpu, gpus, config)
    if check:
        if sim == "verilator":
            check_verilator_cxx()               # a missing compiler: before any build
        check_config(spec, gpus, config, params, ring.node, eparams, l2_config, topology,
                     collective)
    wave_format = check_wave(wave, sim, wave_scope, gpus)
    if timeline is not None:
        check_int("timeline", timeline, 50, 1 << 20, note="the sampling period in cycles")
    tb = {"params": params.to_dict(), "nparams": ring.node.to_dict(), "gpus": gpus,
          "spec": spec.__dict__, "config": config, "seed": seed, "timeline": timeline,
          "bandwidth": list(ring.bandwidth), "charge_headers": ring.charge_headers,
          "engines": eparams.to_dict(),
          "l2_config": dataclasses.asdict(l2_config) if l2_config else None,
          "faults": list(fault_ports) if fault_ports else None,
          "reset_gpu": reset_gpu, "recover": bool(recover), "topology": topology,
          "collective": collective}
    top, make, key = ring_build(ring)
    if not cxx_opt:
        cxx_opt = WAVES_CXX_OPT if wave_format and not os.environ.get("T3_CXX_OPT") else CXX_OPT
    return RunPlan(sim, top, make, key, cxx_opt, tb, ring, wave_format,
                   ring_verilator_args(sim, nparams.linklayer))


def run_config(spec, gpus, config, *, sim=None, seed=1, build_dir=None, wave=None,
               wave_scope=None,
               progress=None, memory_rows=None, latency=LINK_LATENCY,
               bandwidth=LINK_BANDWIDTH, engines=True, cxx_opt=None, timeline=None,
               mcq_depth=None, l2=None, l2_config=None, geometry=None,
               charge_headers=LINK_CHARGES_HEADERS, linklayer=None, faults=None,
               reset_gpu=None, recover=False, topology="ring", collective="ring",
               dma_buffer=None, dram_scheduler=None):
    """Run ``config`` on a ring of ``gpus``; returns the result dict of
    :func:`sim.system.testbench.run_system`.  ``build_dir``: the run's folder (its simulator
    log and result); without one, a temporary folder that a successful run removes (one that
    fails keeps it: the error names its log) unless ``wave`` needs its design.
    ``progress(line)`` sees the testbench's progress lines.  ``engines``: the GPU-side
    engines in the ring's RTL that make the GPUs' traffic (``True``: :func:`engine_params_for`
    the ring, :data:`system.spec.ENGINE_PARAMS` up to 16 GPUs; or an :class:`EngineParams`).
    ``cxx_opt``: the Verilator model's C++ optimisation (default :data:`CXX_OPT`; with a
    ``wave``, :data:`WAVES_CXX_OPT` unless ``T3_CXX_OPT`` is set).
    ``timeline``: sample every GPU's timeline counters every that many
    cycles (``result["timeline"]``, :mod:`sim.system.timeline`).  ``mcq_depth``: the memory
    controller queue's entries (default the node's); ``dma_buffer``: the DMA engine's payload
    buffer in beats, the tile reads it keeps in flight (default the node's, 32);
    ``dram_scheduler``: how the NMC unit schedules (``"in-order"``, the node's, or
    ``"bank-parallel"``: :class:`nmc.rtl.NMCUnit`; ``"fr-fcfs"``: :class:`nmc.frfcfs.FRFCFSUnit`
    with a queue of the MCQ's depth + 16).  ``l2``: an :class:`l2.config.L2Params`: every node has an L2 of that
    geometry (the GEMM's inputs cached; :func:`sim.system.configure.allocate`), programmed
    with ``l2_config`` (an :class:`l2.config.L2Config`; default :data:`SYSTEM_L2_CONFIG`).
    ``geometry``: ``(T3Params, NodeParams)`` in place of the system's
    (:func:`system.spec.node_for` the ring, its adders for the workload's type only,
    :func:`run_formats`; ``memory_rows``, ``mcq_depth``, ``l2``, ``dma_buffer`` and
    ``dram_scheduler`` are refused with it), e.g. the board's
    (:class:`system.board.BoardParams`).  ``charge_headers``: whether a link packet's header
    costs link bandwidth (default :data:`system.spec.LINK_CHARGES_HEADERS`: no, as the
    paper's link model).  ``wave``: write a waveform there, in the format its suffix names
    (``.vcd`` or ``.fst``: :data:`sim.harness.runner.WAVE_FORMATS`); ``wave_scope``: of that
    instance of the ring and below only (``"gpu1"``, ``"gpu1.node.dma"``, ``"link0"``).
    ``linklayer``: the nodes' link layer (``True``: :data:`system.spec.RING_LINKLAYER`, or a
    :class:`linklayer.config.LinkLayerParams`; ``result["linklayer"]`` sums its counters);
    ``faults``: ``{"rate": p, "kinds": ("drop", "flip", "dup")}``, faults injected at random
    on every link's beats and acknowledgements with probability ``p`` per beat
    (:class:`system.link.LinkFaults`; ``result["faults"]`` counts them).  ``reset_gpu``:
    ``{"gpu": g, "phase": name, "at": cycles}``, GPU ``g`` alone held in reset for four cycles
    that many cycles into phase ``name`` (a GPU that fails on its own): the host finds it at
    the phase's timeout and the run ends in :class:`sim.system.host.GPUReset` ("GPU g was
    reset while the ring ran"), or with ``recover`` the whole ring is reset and the job run
    again after every output buffer is zeroed (``result["recovered"]`` says why).
    ``topology``: ``"ring"`` or ``"mesh"`` (every GPU linked to every other,
    :class:`system.fabric.FullMesh`; ``result["mesh"]`` counts what it dropped).
    ``collective``: one of :data:`COLLECTIVES`: ``"ring"`` (the ring reduce-scatter, on
    either topology), and on a mesh ``"direct"`` (the direct reduce-scatter, paper section
    7.1: every GPU's GEMM stores each other GPU's chunk straight into its owner's memory,
    where the near-memory ALUs add it; the all-gather is the ring's), ``"all-to-all"``
    (section 7.2: each chunk stored into its owner's slot, nothing reduced, no all-gather),
    and on either ``"all-reduce"`` (the reduce-scatter, direct on a mesh, then the all-gather
    by track and trigger in the same phase)."""
    import sim.system.testbench as tb
    plan = run_plan(spec, gpus, config, sim=sim, seed=seed, memory_rows=memory_rows,
                    latency=latency, bandwidth=bandwidth, engines=engines, cxx_opt=cxx_opt,
                    timeline=timeline, mcq_depth=mcq_depth, l2=l2, l2_config=l2_config,
                    geometry=geometry, charge_headers=charge_headers, linklayer=linklayer,
                    faults=faults, reset_gpu=reset_gpu, recover=recover, topology=topology,
                    collective=collective, wave=wave, wave_scope=wave_scope,
                    dma_buffer=dma_buffer, dram_scheduler=dram_scheduler)
    sim, top, make, key = plan.sim, plan.top, plan.make, plan.key
    # a temporary folder, without one, gone after a success; a wave's design stays in it
    with run_folder(build_dir, f"t3_system_{config}_", keep=bool(wave)) as build_dir:
        progress_file = build_dir / "progress.txt"
        progress_file.write_text("")
        config_json = dict(plan.tb, progress=str(progress_file))
        stop = threading.Event()

        def follow():
            seen = 0
            while not stop.wait(0.5):
                lines = progress_file.read_text().splitlines()
                for line in lines[seen:]:
                    progress(line)
                seen = len(lines)
        watcher = None
        if progress is not None:
            watcher = threading.Thread(target=follow, daemon=True)
            watcher.start()
        try:
            result = run_for_result(make, top, tb.__name__, "run_system",
                                    config_json, sim, build_dir, waves=bool(wave),
                                    wave_format=plan.wave_format, wave_scope=wave_scope,
                                    cache_key=key, cxx_opt=plan.cxx_opt,
                                    verilator_args=plan.verilator_args)
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
        if wave:
            dumps = sorted(build_dir.glob("*.vcd")) + sorted(build_dir.glob("*.fst"))
            if not dumps:
                raise RuntimeError(f"the simulator wrote no waveform in {build_dir}")
            Path(wave).write_bytes(dumps[0].read_bytes())
            result["wave"] = str(wave)
            result["wave_design"] = str(build_dir / f"{top}.wave.v")
        return result
