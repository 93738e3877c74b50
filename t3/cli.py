# amaranth: UnusedElaboratable=no
"""The ``t3`` command.

``t3 demo``                      the Tracker through one ring reduce-scatter step, checked
``t3 run``                       one configuration of the N-GPU system end to end, checked
``t3 compare``                   every configuration: the paper's Figure 16 and 18 views
``t3 sweep``                     one workload over parameter values, on Dask
``t3 paper``                     the paper's evaluation (Figures 16 and 18) on rings of each
                                 case's TP degree, on Dask; a report with plots
``t3 export BLOCK --out DIR``    Verilog of a block (+ its register map as Markdown)
``t3 synth ecp5|hx8k|up5k BLOCK`` place and route on an ECP5 or iCE40: resources, Fmax, path
``t3 synth board --out DIR``     the ULX3S board's bitstream (two GPUs, a serial port)
``t3 board run --port PORT``     a GEMM -> reduce-scatter on that board from this PC, checked
``t3 board sim``                 the same program against the board in simulation
``t3 bench BLOCK``               the block's figures, one ``name: value unit`` line each

Blocks: ``tracker``, ``mc_arbiter``, ``nmc``, ``dma``, ``node``, ``ring``; ``t3 bench
system`` runs the system's benchmark, ``t3 bench linklayer`` the link layer's (its bandwidth
cost and area), ``t3 bench fpga`` places and routes the blocks, the node and the board (Fmax
against 100 MHz).
"""

import argparse
import dataclasses
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from hw.params import T3Params, check_int
from sim.blocks.tracker.demo import SIMULATORS as DEMO_SIMULATORS
from sim.harness.runner import SIMULATORS
from sim.system.configure import CONFIGS
from sim.system.run import COLLECTIVES
from system.ring import MAX_GPUS, TOPOLOGIES
from system.blocks import BLOCKS as NODE_BLOCKS
from system.spec import FORMATS, MEMORY_ROWS
from tracker.config import TrackerParams


__all__ = ["main", "build_parser", "exportable"]


def _seeds_arg(text):
    """An argparse ``type``: one seed or a comma-separated list of distinct seeds, each >= 1."""
    parse = _int_arg(1)
    seeds = tuple(parse(part) for part in text.split(","))
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must differ, not {text!r}")
    return seeds


def _int_arg(lo=None, hi=None, multiple=None):
    """An argparse ``type``: an integer in ``[lo, hi]`` (a multiple of ``multiple``), refused
    with one line that argparse prefixes with the option's name (exit 2)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None
        try:
            check_int("value", value, lo, hi)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix("value ")) from None
        if multiple and value % multiple:
            raise argparse.ArgumentTypeError(f"must be a multiple of {multiple}, not {value}")
        return value
    return parse


def _writable(folder):
    """Whether a file can be made in the existing ``folder``: tried, since permission bits say
    nothing to root, nor of ``/proc`` or a read-only mount."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".t3-probe-")
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def _output_arg(*suffixes):
    """An argparse ``type``: a file the command will write, checked before any build or
    simulation: its folder exists and a file can be made in it, it is not a folder, and its
    suffix is one of ``suffixes`` (any when none are given)."""
    def parse(text):
        if not text.strip():
            raise argparse.ArgumentTypeError(f"must name a file, not {text!r}")
        path = Path(text)
        if suffixes and path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(
                f"must end in {', '.join(suffixes[:-1])}{' or ' if suffixes[1:] else ''}"
                f"{suffixes[-1]}, not {text!r}")
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise argparse.ArgumentTypeError(f"folder {str(folder)!r} of {text!r} does not exist")
        if not _writable(folder) or (path.exists() and not os.access(path, os.W_OK)):
            raise argparse.ArgumentTypeError(f"{text!r} cannot be written")
        return text
    parse.writes, parse.suffixes = "file", suffixes
    return parse


#: Dask's address schemes that this check can reach (over TCP).
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss")


def _scheduler_arg(text, timeout=5.0):
    """An argparse ``type``: a running Dask scheduler's address, ``[tcp://]HOST:PORT`` (or
    ``tls``, ``ws``, ``wss``), refused before any job unless something listens there."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    host, colon, port = rest.rstrip("/").rpartition(":")
    host = host.strip("[]")
    if scheme not in SCHEDULER_SCHEMES or not colon or not host or not port.isdigit() \
            or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(
            f"must be a Dask scheduler's address, {'|'.join(SCHEDULER_SCHEMES)}://HOST:PORT "
            f"(e.g. tcp://127.0.0.1:8786), not {text!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise argparse.ArgumentTypeError(
            f"no scheduler answers at {text!r} ({error.strerror or error}); start one with "
            f"'dask scheduler', or leave --scheduler out for a local cluster") from None
    return text


def _scale_arg(text):
    """An argparse ``type``: the paper runs' scale, a number in (0, 1]."""
    from sim.system.workload import scaled_cus
    try:
        value = float(text)
        scaled_cus(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], not {text!r}") from None
    return value


def _folder_arg(text):
    """An argparse ``type``: a folder the command will write into (made if missing: checked
    in its nearest existing folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a folder, not {text!r}")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    existing = path
    while not existing.exists():
        existing = existing.parent if str(existing.parent) != str(existing) else Path(".")
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{str(existing)!r} of {text!r} is a file, not a folder")
    if not _writable(existing):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be written")
    return text


_folder_arg.writes = "folder"


def _param_args(parser, title, cls, names, dest_prefix=""):
    """One option per field ``names`` of the params dataclass ``cls``, its help, range and
    default the field's own (:func:`hw.params.param`); the default is left to the dataclass
    (``None`` here: the field is left out when the option is not given), and so is the range
    check, which names the field.  ``dest_prefix`` begins the options' names and
    destinations (``link_``: ``--link-timeout``).  Returns the options' group."""
    from hw.params import param_help
    g = parser.add_argument_group(title)
    for name in names:
        g.add_argument(f"--{(dest_prefix + name).replace('_', '-')}", dest=dest_prefix + name,
                       type=int, default=None, help=param_help(cls, name))
    return g


def _given(args, names, dest_prefix=""):
    """``{field: value}`` of the options the user gave."""
    return {n: getattr(args, dest_prefix + n) for n in names
            if getattr(args, dest_prefix + n) is not None}


#: The system widths every block's commands take as options (their help and range are the
#: fields' own, :func:`hw.params.param`).
SYSTEM_ARGS = ("addr_bits", "wg_id_bits", "wf_id_bits")


def param_fields(cls):
    """The fields of params dataclass ``cls`` declared with :func:`hw.params.param`: the
    options of a block's commands, in the fields' order."""
    return tuple(f.name for f in dataclasses.fields(cls) if "doc" in f.metadata)


def _system_args(parser):
    _param_args(parser, "system widths", T3Params, SYSTEM_ARGS)


def _params(args):
    return T3Params(**_given(args, SYSTEM_ARGS))


def _tracker_args(parser):
    _param_args(parser, "Tracker geometry", TrackerParams, param_fields(TrackerParams))


def _tparams(args):
    return TrackerParams(**_given(args, param_fields(TrackerParams)))


def _block_args(block):
    """``t3 export``'s and ``t3 synth``'s options for ``block`` (a
    :class:`system.blocks.Block`): one per field of its parameters (:func:`param_fields`) and
    per field of its ``choices``, and the arbiter's ``--mcq-ram``."""
    def add(parser):
        prefix = block.option_prefix
        group = _param_args(parser, f"{block.name} parameters", block.params,
                            param_fields(block.params), prefix)
        for name, values in block.choices:
            default = getattr(block.params(), name)
            group.add_argument(f"--{(prefix + name).replace('_', '-')}", dest=prefix + name,
                               choices=values, default=None,
                               help=f"one of {', '.join(values)} (default {default}; "
                                    f"{block.doc})")
        if block.name == "mc_arbiter":
            group.add_argument(
                "--mcq-ram", choices=("lut", "block"), default=None,
                help="where the MCQ's entries are kept, cycle for cycle the same: LUT RAM or "
                     "block RAM (default: LUT RAM up to 64 entries, block RAM above and on an "
                     "iCE40, which has no LUT RAM)")
    return add


def _block_build(block):
    """The constructor of ``block`` from its commands' options (:func:`_block_args`)."""
    def build(args):
        fields = _given(args, param_fields(block.params) + tuple(n for n, _ in block.choices),
                        block.option_prefix)
        options = {}
        if block.name == "mc_arbiter":
            mcq_ram = args.mcq_ram
            if mcq_ram is None and getattr(args, "target", None) in ("hx8k", "up5k"):
                mcq_ram = "block"
            options["mcq_ram"] = mcq_ram
        return block.build(_params(args), block.params(**fields), **options)
    return build


def _node_args(parser):
    g = parser.add_argument_group("GPU node")
    g.add_argument("--memory-rows", type=_int_arg(1), default=MEMORY_ROWS,
                   help=f"HBM rows per bank (default {MEMORY_ROWS}: 128 KiB)")
    g.add_argument("--l2", action="store_true",
                   help="with the paper rings' L2 (128 sets x 16 ways of 32 bytes, 4 banks: "
                        "docs/l2.md)")


def _node_params(args):
    from system.spec import PAPER_L2, node_for
    return node_for(memory_rows=args.memory_rows, l2=PAPER_L2 if args.l2 else None)


def _node(args):
    from system.node import GPUNode
    return GPUNode(_params(args), _node_params(args))


def _gpu(args):
    from system.gpu import GPU
    from system.spec import ENGINE_PARAMS
    return GPU(_params(args), _node_params(args), ENGINE_PARAMS)


def _ring_args(parser):
    g = parser.add_argument_group("GPU node")
    g.add_argument("--memory-rows", type=_int_arg(1), default=None,
                   help=f"HBM rows per bank (default {MEMORY_ROWS}, {2 * MEMORY_ROWS} for more "
                        f"than 8 GPUs: what t3 run uses)")
    g.add_argument("--formats", type=_formats_arg, default=FORMATS, metavar="T[,T...]",
                   help=f"the element types the near-bank ALUs and the engines' adders add "
                        f"(default {','.join(FORMATS)}; t3 run's ring: its workload's type)")
    g.add_argument("--link-layer", action="store_true",
                   help="the link layer between every DMA engine and its link (docs/linklayer.md)")
    g = parser.add_argument_group("ring")
    g.add_argument("--gpus", type=_int_arg(2, MAX_GPUS), default=4,
                   help=f"GPUs, 2 to {MAX_GPUS} (default 4)")
    g.add_argument("--topology", choices=TOPOLOGIES, default="ring",
                   help="ring (default), or mesh: every GPU linked to every other")
    g.add_argument("--link-latency", type=_int_arg(2), default=None,
                   help="link latency in cycles (default: the scaled system's)")
    g.add_argument("--link-bw", default=None, metavar="NUM/DEN",
                   help="link beats per cycle as a fraction (default: the scaled system's 3/80)")
    _charge_headers_arg(g)
    g.add_argument("--engines", action="store_true",
                   help="the simulation top: every GPU with its traffic engine (t3 run's ring)")


def _charge_headers_arg(group):
    group.add_argument("--charge-headers", action="store_true",
                       help="a link packet's header costs a beat of the link's bandwidth "
                            "(default: headers free, as the paper's link model)")


def _formats_arg(text):
    """An argparse ``type``: comma-separated element types of the near-bank ALUs."""
    from hw.interfaces import ElemType
    known = [e.name.lower() for e in ElemType]
    formats = tuple(f for f in text.split(",") if f)
    if not formats or any(f not in known for f in formats) or len(set(formats)) != len(formats):
        raise argparse.ArgumentTypeError(f"distinct element types of {', '.join(known)}, "
                                         f"comma-separated, not {text!r}")
    return formats


def _link_bw(text):
    from system.spec import LINK_BANDWIDTH
    if text is None:
        return LINK_BANDWIDTH
    try:
        num, den = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--link-bw must be NUM/DEN (e.g. 3/80), not {text!r}") from None
    return num, den


def _ring_spec(args):
    """The :class:`system.spec.RingSpec` of ``t3 export ring``'s and ``t3 synth``'s options."""
    from system.spec import LINK_LATENCY, ring_for
    return ring_for(args.gpus, engines=args.engines, memory_rows=args.memory_rows,
                    formats=args.formats, linklayer=args.link_layer or None,
                    topology=args.topology, bandwidth=_link_bw(args.link_bw),
                    latency=LINK_LATENCY if args.link_latency is None else args.link_latency,
                    charge_headers=args.charge_headers, params=_params(args))


def _ring(args):
    return _ring_spec(args).build()


def exportable():
    """``{name: (Verilog module name, argument adder, constructor from parsed arguments)}`` of
    what ``t3 export`` and ``t3 synth`` build: every block of the node's registry
    (:data:`system.blocks.BLOCKS`, as it is when the parser is built), the node, the GPU and
    the ring."""
    return {**{name: (block.top, _block_args(block), _block_build(block))
               for name, block in NODE_BLOCKS.items()},
            "node": ("t3_node", _node_args, _node),
            "gpu": ("t3_gpu", _node_args, _gpu),
            "ring": ("t3_ring", _ring_args, _ring)}


def cmd_export(args):
    from hw.export import write_verilog
    top_name, _, build = exportable()[args.block]
    component = build(args)
    path = write_verilog(component, top_name, args.out)
    print(f"wrote {path}")
    regs = getattr(component, "regs", None)
    if regs is not None:
        md = Path(args.out) / f"{top_name}_registers.md"
        md.write_text(f"# {top_name} registers\n\n32-bit words; see hw/csr.py for the bus "
                      f"timing.\n\n{regs.markdown()}\n")
        print(f"wrote {md}")
    return 0


def cmd_synth(args):
    import json
    from concurrent.futures import ThreadPoolExecutor
    from hw.pnr import TARGETS, DoesNotFit, TimedOut, place_and_route
    top_name, _, build = exportable()[args.block]
    component = build(args)
    how = "its ports on two pins" if TARGETS[args.target].wrap else "out of context"
    print(f"T3 synth: {top_name} on {TARGETS[args.target].device}, {how}, asking "
          f"{args.freq:g} MHz (Yosys + nextpnr; a block takes seconds to minutes, the node "
          f"tens of minutes)", flush=True)
    # several seeds: each placed and routed (in turn, or --jobs at once), the slowest one's
    # figures reported (a design's Fmax moves with its placement: the node's by up to 10 MHz,
    # docs/fpga.md)
    results = {}

    def place(seed):
        return place_and_route(component, top_name, args.target, args.freq, seed,
                               timeout_s=args.timeout)
    try:
        # --jobs seeds at once, each its own Yosys and nextpnr (a core each); their lines in
        # seed order
        with ThreadPoolExecutor(max_workers=min(args.jobs, len(args.seed))) as pool:
            for seed, result in zip(args.seed, pool.map(place, args.seed)):
                results[seed] = result
                if len(args.seed) > 1:
                    fmax = ", ".join(f"{clock} {achieved:.1f} MHz"
                                     for clock, (achieved, _) in result.fmax.items())
                    print(f"{top_name}.{args.target}.seed{seed}: {fmax} ({result.path_ns:.2f} "
                          f"ns path; {result.seconds:.0f} s)", flush=True)
    except (DoesNotFit, TimedOut) as error:
        print(f"t3: error: {error}", file=sys.stderr)
        return 1
    worst = min(results, key=lambda seed: min(a for a, _ in results[seed].fmax.values()))
    result = results[worst]
    for line in result.lines(top_name):
        print(line)
    families = result.family_lines(args.paths)
    if families:
        print(f"{top_name}.{args.target}.families: the {len(families)} worst families of paths "
              f"(start -> end register, the worst slack, the endpoints failing of those within "
              f"0.25 ns):")
        for line in families:
            print(f"  {line}")
    if len(results) > 1:
        print(f"{top_name}.{args.target}.seeds: {len(results)} (the figures above are seed "
              f"{worst}'s, the slowest)")
    print(f"{top_name}.{args.target}.seconds: {sum(r.seconds for r in results.values()):.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_dict() if len(results) == 1 else
                      {"worst_seed": worst,
                       "seeds": {str(seed): r.to_dict() for seed, r in results.items()}},
                      f, indent=1)
    return 0


def cmd_synth_board(args):
    import json
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    from hw.pnr import build_bitstream
    from system.board import BoardTop
    bparams = _board_params(args)
    print(f"T3 synth board: {bparams.gpus} GPUs on a ULX3S (LFE5U-85F-6), {bparams.clock_hz / 1e6:g}"
          f" MHz, serial {bparams.baud} baud (Yosys + nextpnr + ecppack; 15 minutes to an hour: "
          f"docs/fpga.md)",
          flush=True)
    result, bitstream = build_bitstream(BoardTop(bparams), ULX3S_85F_Platform(), "t3_board",
                                        args.out, args.seed)
    clock_mhz = bparams.clock_hz / 1e6
    for line in result.lines("board"):
        print(line)
    print(f"board.ecp5.seconds: {result.seconds:.0f} s")
    achieved = min(a for a, _ in result.fmax.values())
    # a board short of its clock is written but not offered for programming
    print(f"wrote {bitstream} ({bitstream.stat().st_size} bytes)" +
          (f"; program it with openFPGALoader -b ulx3s {bitstream}" if achieved >= clock_mhz
           else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(result.to_dict(), bitstream=str(bitstream)), f, indent=1)
    if achieved < clock_mhz:
        print(f"t3: error: the board reaches {achieved:.1f} MHz, short of its "
              f"{clock_mhz:g} MHz clock (seed {args.seed}): the bitstream may fail at it; try "
              f"another --seed or a lower --clock", file=sys.stderr)
        return 1
    return 0


def _board_params(args):
    from system.board import BoardParams
    clock_mhz = getattr(args, "clock", None)
    return BoardParams(baud=getattr(args, "baud", BoardParams.baud),
                       clock_hz=BoardParams.clock_hz if clock_mhz is None else
                       round(clock_mhz * 1e6))


def _board_args(p):
    p.add_argument("--baud", type=_int_arg(1200), default=115_200,
                   help="the serial port's bits per second (default 115200)")


def cmd_board(args):
    from sim.board.run import BOARD_SPEC, run_on_board, simulate_board
    from sim.system.workload import GemmSpec
    bparams = _board_params(args)
    spec = GemmSpec(**dict(BOARD_SPEC.__dict__, k=args.k))
    start = time.perf_counter()
    if args.action == "sim":
        print(f"T3 board (simulated): the host program through the board core's serial pins; "
              f"{bparams.gpus} GPUs, GEMM {spec.m} x {spec.n} x {spec.k} {spec.dtype}, "
              f"{args.config}", flush=True)
        result = simulate_board(spec, args.config, bparams=bparams, seed=args.seed)
    else:
        from sim.board.host import BoardError
        print(f"T3 board on {args.port} at {bparams.baud} baud: {bparams.gpus} GPUs, GEMM "
              f"{spec.m} x {spec.n} x {spec.k} {spec.dtype}, {args.config}", flush=True)
        try:
            result = run_on_board(args.port, spec, args.config, bparams=bparams,
                                  seed=args.seed, progress=print)
        except BoardError as error:
            print(f"t3: error: {error}", file=sys.stderr)
            return 1
    for phase, cycles in result["phase_cycles"].items():
        print(f"  {phase:8s} {cycles} cycles")
    print(f"  serial   {result['serial_commands']} commands, {time.perf_counter() - start:.1f} s")
    print(f"  result   {'bit-exact against numpy' if result['verified'] else 'WRONG'}")
    return 0 if result["verified"] else 1


def cmd_demo(args):
    from sim.blocks.tracker.demo import run_ring_step
    from sim.harness.runner import default_sim
    _check_wave(args)
    params, tparams = _params(args), _tparams(args)
    sim = args.sim or default_sim()
    n_tiles = args.wgs * args.wfs
    beats = args.tile_elems * 2 // params.beat_bytes
    print("T3 Tracker demo: one GPU's step of the ring reduce-scatter (docs/design.md)")
    print(f"  workload   {args.wgs} workgroups x {args.wfs} wavefronts = {n_tiles} tiles of "
          f"{args.tile_elems} fp16 elements; each element gets 2 updates (local + DMA)")
    print(f"  tracker    {tparams.sets} sets x {tparams.ways} ways; simulator {sim}")
    print(f"  running    {2 * n_tiles * beats} accesses (building the Verilog first)...",
          flush=True)
    start = time.perf_counter()
    try:
        result = run_ring_step(sim, params, tparams, args.wgs, args.wfs, args.tile_elems,
                               seed=args.seed, wave=args.wave)
    except AssertionError as error:
        print(f"  FAILED     the hardware disagreed with the golden model:\n{error}")
        return 1
    regs = result["registers"]
    print(f"  done       in {time.perf_counter() - start:.1f} s "
          f"({result['cycles_per_s']:.0f} simulated cycles/s)")
    print(f"  triggers   {result['triggers']} of {n_tiles} tiles fired")
    print(f"  throughput {result['accesses_per_cycle']:.3f} accesses/cycle (limit 1.0)")
    print(f"  latency    {result['latency_min']}-{result['latency_max']} cycles from the "
          f"completing access to its trigger")
    print(f"  occupancy  peak {regs['peak_occupancy']} of {tparams.sets * tparams.ways} "
          f"entries; {regs['errors']} errors; status {regs['status']:#x}")
    print(f"  verified   {'yes' if result['verified'] else 'NO'}: every trigger, counter and "
          f"status bit equals the golden model")
    if args.wave:
        print(f"  waveform   {args.wave}")
    return 0 if result["verified"] else 1


def _workload(args):
    """The workload's spec and the ring settings of its runs (a preset runs on a ring of its
    TP degree, with the paper rings' memory, engines and scaled link latency; another
    ``--gpus`` is refused); sets ``args.gpus``."""
    from sim.system.run import preset_setup
    from sim.system.workload import PRESETS, preset, workload_spec
    if args.preset and args.gpus not in (None, PRESETS[args.preset]["tp"]):
        raise ValueError(f"--gpus {args.gpus}: preset {args.preset} runs on a ring of its TP "
                         f"degree, {PRESETS[args.preset]['tp']} GPUs (leave --gpus out)")
    if args.gpus is None:
        args.gpus = PRESETS[args.preset]["tp"] if args.preset else 4
    tokens = getattr(args, "tokens", None)
    try:
        spec = workload_spec(args.gpus, args.preset, args.m, args.n, args.k, args.dtype, tokens)
    except ValueError as error:
        if str(error).startswith("tokens "):
            raise ValueError(f"--{error}") from None
        raise
    if args.scale is not None:
        if not args.preset:
            raise ValueError("--scale sizes a preset's GPU; it needs --preset")
        spec = preset(args.preset, args.gpus, scale=args.scale, dtype=spec.dtype,
                      tokens=tokens)
    ring = preset_setup(spec, args.gpus) if args.preset else {}
    if getattr(args, "memory_rows", None):
        ring["memory_rows"] = args.memory_rows
    if getattr(args, "charge_headers", False):
        ring["charge_headers"] = True
    return spec, ring


def _fault_rate_arg(text):
    """An argparse ``type``: a fault probability per beat the injectors can draw."""
    from system.link import FAULT_RATE_BITS
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 2 ** -FAULT_RATE_BITS <= rate <= 0.5:
        raise argparse.ArgumentTypeError(f"a probability per beat from 2**-{FAULT_RATE_BITS} "
                                         f"(6e-8) to 0.5, not {text}")
    return rate


def _fault_kinds_arg(text):
    """An argparse ``type``: comma-separated kinds of :data:`system.link.FAULT_KINDS`."""
    from system.link import FAULT_KINDS
    kinds = tuple(k for k in text.split(",") if k)
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"kinds of {', '.join(FAULT_KINDS)}, comma-separated, "
                                         f"not {text!r}")
    return kinds


def _link_layer_options(args):
    """``run_config``'s ``linklayer`` and ``faults`` from ``t3 run``'s options."""
    if args.link_faults is None and args.fault_kinds is not None:
        raise ValueError("--fault-kinds: needs --link-faults RATE")
    if args.link_faults is not None and not args.link_layer:
        raise ValueError("--link-faults: needs --link-layer (without it a fault on the link "
                         "is a wrong result)")
    out = {"linklayer": True} if args.link_layer else {}
    if args.link_faults is not None:
        out["faults"] = {"rate": args.link_faults,
                         "kinds": args.fault_kinds or ("drop", "flip", "dup")}
    return out


def _scale_line(spec, gpus, ring):
    from sim.system.run import LINK_LATENCY, describe_scale
    return f"  scale      {describe_scale(spec, gpus, ring.get('latency', LINK_LATENCY))}"


def _print_result(r, collective="ring"):
    ph = ", ".join(f"{k} {v}" for k, v in r["phase_cycles"].items())
    d = r["dram"]
    print(f"  cycles     {r['cycles']} ({ph})")
    # the collective: a reduce-scatter and the all-gather, or an all-to-all (no all-gather)
    coll = "RS" if "ag" in r["phase_cycles"] else \
        "all-reduce" if collective == "all-reduce" else "all-to-all"
    ag = f", AG {d['ag_reads']} / {d['ag_writes']}" if coll == "RS" else ""
    print(f"  DRAM       GEMM {d['gemm_reads']} reads / {d['gemm_writes']} writes, {coll} "
          f"{d['rs_reads']} / {d['rs_writes']}{ag} (beats)")
    print(f"  link       {d['link_utilization']:.3f} of the links' capacity during the {coll}")
    print(f"  MC         the GEMM's requests waited {r['compute_wait']} cycles at the MC "
          f"arbiter (all GPUs)")
    if r.get("l2"):
        gemm = r["l2"]["gemm_rs" if "gemm_rs" in r["l2"] else "gemm"]
        reads = gemm["read_hits"] + gemm["read_misses"] + gemm["read_merged"]
        print(f"  L2         the GEMM's {reads} cached reads: {gemm['read_hits']} hits, "
              f"{gemm['read_merged']} merged into a miss, {gemm['read_misses']} misses")
    print(f"  tracker    peak occupancy {d['tracker_peak_occupancy']} entries")
    ll = r.get("linklayer")
    if ll:
        repairs = {k: v for k, v in ll.items() if k not in ("tx_packets", "rx_delivered") and v}
        print(f"  link layer {ll['tx_packets']} packets sent, {ll['rx_delivered']} delivered; "
              + (", ".join(f"{k} {v}" for k, v in repairs.items()) or "nothing repaired"))
    if r.get("faults"):
        f = r["faults"]
        print(f"  faults     {f['faults_dropped']} beats dropped, {f['faults_flipped']} "
              f"flipped, {f['faults_duplicated']} duplicated, {f['faults_acks']} "
              f"acknowledgements hit")
    engines = (f" ({r['engine_cycles_per_s']:.0f} while the engines run)"
               if r.get("engine_cycles_per_s") else "")
    print(f"  simulation {r['simulated_cycles']} cycles at {r['cycles_per_s']:.0f} cycles/s"
          f"{engines}")


def _check_wave(args):
    """A waveform's suffix names its format, which the simulator must write (Verilator VCD
    or FST, Icarus FST); ``--wave-scope`` needs a wave and an instance of the ring."""
    from sim.harness.runner import default_sim
    from sim.system.run import check_wave
    scope = getattr(args, "wave_scope", None)
    try:
        check_wave(args.wave, args.sim or default_sim(), scope, getattr(args, "gpus", None))
    except ValueError as error:
        raise ValueError(f"--{error}".replace("--wave_scope", "--wave-scope")) from None


def cmd_run(args):
    import json
    from sim.system.run import run_config
    spec, ring = _workload(args)            # sets the ring size a preset implies
    _check_wave(args)
    ring.update(_link_layer_options(args))
    spec = _topology(args, spec, ring)
    print(f"T3 system: {args.gpus} GPUs, {args.config}, workload {spec.name}: "
          f"{spec.m} x {spec.n} x {spec.k} {spec.dtype}")
    print(_scale_line(spec, args.gpus, ring))
    print("  running    (the first run of a ring size builds its Verilog: about a minute up "
          "to 16 GPUs, three for 32)", flush=True)
    try:
        r = run_config(spec, args.gpus, args.config, sim=args.sim, seed=args.seed,
                       wave=args.wave, wave_scope=args.wave_scope, **ring,
                       timeline=args.timeline_period if args.timeline or args.trace
                       else None,
                       progress=lambda line: print(f"  ...        {line}", flush=True))
    except AssertionError as error:
        print(f"  FAILED     {str(error)[-3000:]}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"config": args.config, "gpus": args.gpus, "verified": False,
                           "error": str(error)[-3000:]}, f, indent=1)
        return 1
    _print_result(r, args.collective)
    what, reference = {
        "direct": ("output chunks", "the numpy sum (exact: alike in any order)"),
        "all-reduce": ("output chunks", "the numpy sum (exact: alike in any order)"),
        "all-to-all": ("own chunk and received slots", "the GEMM outputs they copy")}.get(
        args.collective if args.topology == "mesh" else "ring",
        ("output chunks", "the ring-ordered numpy reference"))
    print(f"  verified   {'yes' if r['verified'] else 'NO'}: every GPU's {what} equal "
          f"{reference} bit for bit")
    if args.wave:
        from sim.system.waves import write as write_save
        save = write_save(r, args.wave_scope)
        print(f"  waveform   {args.wave}" + (f" ({args.wave_scope} and below)"
                                              if args.wave_scope else ""))
        print(f"  save file  {save} (gtkwave {save}: each block's ports in a group)")
    if args.timeline:
        from sim.system.timeline import write
        files = write(r, args.timeline)
        print(f"  timeline   {', '.join(map(str, files))} ({len(r['timeline']['samples'])} "
              f"samples every {args.timeline_period} cycles)")
    if args.trace:
        from sim.system.trace import write as write_trace
        write_trace({args.config: r}, args.trace)
        print(f"  trace      {args.trace} (open in ui.perfetto.dev or chrome://tracing; one "
              f"cycle shown as 1 ns)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1, default=str)
        print(f"  json       {args.json}")
    return 0 if r["verified"] else 1


def _topology(args, spec, ring):
    """``spec`` with ``--inputs``; ``ring`` gains ``--topology`` and ``--collective``, refused
    in one line naming the option before any output."""
    from sim.system.run import check_collective
    spec = dataclasses.replace(spec, inputs=args.inputs)
    ring.update(topology=args.topology, collective=args.collective)
    try:
        check_collective(args.collective, args.topology, args.gpus,
                         getattr(args, "link_layer", False), spec)
    except ValueError as error:
        raise ValueError(f"--{error}") from None
    return spec


def cmd_compare(args):
    import json
    from sim.system.compare import figure16_lines, figure18_lines, plot, run_all
    spec, ring = _workload(args)
    spec = _topology(args, spec, ring)
    print(f"T3 compare: {args.gpus} GPUs, workload {spec.name}: {spec.m} x {spec.n} x "
          f"{spec.k} {spec.dtype}")
    print(_scale_line(spec, args.gpus, ring), flush=True)
    try:
        if args.trace:
            ring["timeline"] = args.timeline_period
        results = run_all(spec, args.gpus, sim=args.sim, seed=args.seed, **ring,
                          progress=lambda line: print(f"  ...  {line}", flush=True))
    except AssertionError as error:
        print(f"  FAILED     {str(error)[-3000:]}")
        return 1
    print()
    for line in figure16_lines(results) + [""] + figure18_lines(results):
        print(line)
    verified = all(r["verified"] for r in results.values())
    print(f"\nverified: {'every run' if verified else 'NOT every run'} bit for bit")
    if args.plot:
        plot(results, args.plot)
        print(f"plot: {args.plot}")
    if args.trace:
        from sim.system.trace import write as write_trace
        write_trace(results, args.trace)
        print(f"trace: {args.trace} (every configuration side by side; open in "
              f"ui.perfetto.dev or chrome://tracing; one cycle shown as 1 ns)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0 if verified else 1


def cmd_paper(args):
    from sim.system.paper import (check_cases, evaluate, figure16_lines, figure18_lines,
                                  paper_jobs, recorded_twins, select_cases, select_configs,
                                  shared_runs, write_report)
    from sim.system.workload import scaled_cus
    if args.figure17:
        if args.trace:
            raise ValueError("--trace: --figure17 draws its runs' timelines itself; trace the "
                             "case with --cases T-NLG-FC-2-TP8 --trace DIR")
        return _paper_figure17(args)
    cases, configs = select_cases(args.cases), select_configs(args.configs)
    if args.record:
        from sim.system.configure import CONFIGS, ISOLATED_RS
        from sim.system.figures import SCALES
        from sim.system.paper import FIGURE16_CASES, LARGE_CASES
        if args.scale not in SCALES:
            raise ValueError(f"--record: the committed scales are "
                             f"{', '.join(f'{s:g}' for s in SCALES)}, not {args.scale:g}")
        if not set(cases) <= set(FIGURE16_CASES + LARGE_CASES) or \
                set(configs) != set(CONFIGS + (ISOLATED_RS,)):
            raise ValueError("--record needs the paper's cases (Figure 16's by default, or "
                             "some, or section 6.4's tp32: a current record keeps the "
                             "others) and every run (the default --configs)")
    print("T3 paper: checking every run's programming ...", flush=True)
    check_cases(cases, args.scale, configs)
    cus = scaled_cus(args.scale)
    recorded = None
    if args.record:                 # a case whose twin a current record holds runs nothing
        from sim.system import figures
        old = figures.load(args.scale)
        if old is not None and not figures.moved_inputs("paper", old):
            recorded = old["results"]
    reuse = recorded_twins(cases, recorded or {}, configs, args.scale)
    run = tuple(c for c in cases if c not in reuse)
    jobs = paper_jobs(run, configs, args.scale, args.sim) if run else []
    where = args.scheduler or f"a local cluster of {args.workers} worker processes"
    shared = shared_runs(run, args.scale)
    print(f"T3 paper: {len(run) - len(shared)} cases x {len(configs)} runs = {len(jobs)} jobs "
          f"on {where}; "
          f"scale {args.scale:g} ({cus} CUs a GPU); every run verified bit for bit")
    twins = {**shared, **reuse}
    if twins:
        print(f"  and {len(twins)} more case{'s' if len(twins) > 1 else ''}, each the run of "
              f"another (the same GEMM shapes "
              f"in Table 2, ring and settings{'; from the record' if reuse else ''}): "
              f"{', '.join(f'{c} = {o}' for c, o in twins.items())}")
    print("  (a ring size's first run builds it: about a minute up to 16 GPUs, three for 32)",
          flush=True)
    cache = None if args.no_cache else (args.cache or Path.home() / ".cache" / "t3-results")
    results, failures, wall = evaluate(cases, configs, scale=args.scale, sim=args.sim,
                                       cache=cache, scheduler=args.scheduler,
                                       workers=args.workers, check=False, recorded=recorded,
                                       timeline=args.timeline_period if args.trace else None)
    print()
    for line in figure16_lines(results) + [""] + figure18_lines(results):
        print(line)
    for name, error in failures.items():
        print(f"FAILED {name}: {error}")
    report = write_report(results, failures, args.out, scale=args.scale, wall_s=wall)
    if args.trace:
        from sim.system.paper import write_traces
        files = write_traces(results, args.trace)
        print(f"traces: {len(files)} in {args.trace}, one a case, its runs side by side "
              f"(open in ui.perfetto.dev or chrome://tracing)")
    failed_jobs = [name for name in failures if name.partition("/")[0] not in twins]
    if jobs:
        print(f"\n{len(jobs) - len(failed_jobs)} of {len(jobs)} runs verified bit for bit in "
              f"{wall / 60:.1f} minutes; report: {report}")
    else:
        print(f"\nnothing to run: every case's runs are its twin's in the record; report: "
              f"{report}")
    if args.record and not failures:
        from sim.system import figures
        path = figures.record(results, args.scale, sim=args.sim)
        print(f"recorded: {path}, with the key of what its runs ran")
        for page in figures.refresh():
            print(f"updated: {page}")
    elif args.record:
        print("not recorded: some runs failed")
    return 1 if failures else 0


def _paper_figure17(args):
    """``t3 paper --figure17``: the Figure 17 case's three timeline runs, drawn (and kept)."""
    from sim.sweep import run_jobs
    from sim.system import figure17, figures
    if args.cases != "fig16" or args.configs is not None:
        raise ValueError("--figure17 runs its own case and runs: no --cases or --configs")
    if args.record and args.scale not in figures.SCALES:
        raise ValueError(f"--record: the committed scales are "
                         f"{', '.join(f'{s:g}' for s in figures.SCALES)}, not {args.scale:g}")
    jobs = figure17.jobs(args.scale, args.sim)
    where = args.scheduler or f"a local cluster of {args.workers} worker processes"
    print(f"T3 paper: Figure 17, {figure17.CASE} at scale {args.scale:g} in "
          f"{', '.join(figure17.CONFIGS)} with timelines; {len(jobs)} jobs on {where}",
          flush=True)
    cache = None if args.no_cache else (args.cache or Path.home() / ".cache" / "t3-results")
    outcomes = run_jobs(jobs, cache=cache, scheduler=args.scheduler, workers=args.workers)
    failed = {name: o.error for name, o in outcomes.items() if not o.ok}
    for name, error in failed.items():
        print(f"FAILED {name}: {error}")
    if failed:
        return 1
    runs = {o.value["config"]: o.value for o in outcomes.values()}
    for line in figure17.markdown({"runs": runs}):
        print(line)
    files = figure17.write(runs, args.out)
    print(f"report: {', '.join(map(str, files))}")
    if args.record:
        path = figures.record_figure17(runs, args.scale, sim=args.sim)
        print(f"recorded: {path}, with the key of what its runs ran")
        for page in figures.refresh():
            print(f"updated: {page}")
    return 0


def cmd_sweep(args):
    import json
    from sim.sweep import run_jobs
    from sim.system.paper import select_configs
    from sim.system.sweeps import check_points, parse_vary, sweep_jobs, sweep_lines, sweep_points
    vary = parse_vary(args.vary)
    configs = select_configs(args.configs) if args.configs != "all" else select_configs(None)
    spec, ring = _workload(args)
    points = sweep_points(spec, vary)
    check_points(points, args.gpus, configs, ring)
    jobs = sweep_jobs(points, args.gpus, configs, ring, seed=args.seed, sim=args.sim,
                      timeline=args.timeline_period if args.trace else None)
    where = args.scheduler or f"a local cluster of {args.workers} worker processes"
    print(f"T3 sweep: {args.gpus} GPUs, workload {spec.name}: {spec.m} x {spec.n} x {spec.k} "
          f"{spec.dtype}; {len(points)} points x {len(configs)} configurations = {len(jobs)} "
          f"jobs on {where}", flush=True)
    cache = None if args.no_cache else (args.cache or Path.home() / ".cache" / "t3-results")
    start = time.monotonic()
    outcomes = run_jobs(jobs, cache=cache, scheduler=args.scheduler, workers=args.workers)
    print("\ncycles per run (every run verified bit for bit); speedups over Sequential")
    for line in sweep_lines(points, configs, outcomes):
        print(line)
    failed = sum(not o.ok for o in outcomes.values())
    print(f"\n{len(jobs) - failed} of {len(jobs)} runs verified in "
          f"{(time.monotonic() - start) / 60:.1f} minutes")
    if args.trace:
        from sim.system.sweeps import write_traces
        files = write_traces(points, outcomes, args.trace)
        print(f"traces: {len(files)} in {args.trace}, one a point, its configurations side by "
              f"side (open in ui.perfetto.dev or chrome://tracing)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: {"ok": o.ok, "value": o.value, "error": o.error}
                       for name, o in outcomes.items()}, f, indent=1)
    return 1 if failed else 0


def _workload_args(p):
    from sim.system.workload import PRESETS
    g = p.add_argument_group("workload (default: a 64 x 32*gpus GEMM whose K balances GEMM "
                             "and RS)")
    g.add_argument("--gpus", type=_int_arg(2, MAX_GPUS), default=None,
                   help=f"GPUs in the ring, 2 to {MAX_GPUS} (default 4; with --preset, its TP "
                        f"degree, no other)")
    g.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                   help="a Table 2 sub-layer, scaled (docs/paper.md) and run on a ring of its "
                        "TP degree: " + ", ".join(sorted(PRESETS)))
    g.add_argument("--tokens", type=_int_arg(1), default=None,
                   help="with --preset: a small-token step of its sub-layer (the generation "
                        "phase, paper section 7.3): that many tokens, fewer than its SL x B "
                        "(docs/collectives.md)")
    g.add_argument("--scale", type=_scale_arg, default=None,
                   help="with --preset: size of the scaled GPU, 0 < SCALE <= 1, 8 x SCALE CUs "
                        "(default 1; t3 paper's default is 0.5)")
    g.add_argument("--m", type=_int_arg(1), help="rows of the output (default 64)")
    g.add_argument("--n", type=_int_arg(1), help="columns of the output (default 32 x gpus)")
    g.add_argument("--k", type=_int_arg(1), help="inner dimension per GPU (default: balanced)")
    g.add_argument("--dtype", choices=("fp16", "fp32"), help="element type (default fp16)")
    p.add_argument("--sim", choices=SIMULATORS,
                   help="simulator (default: $SIM, else verilator)")
    p.add_argument("--seed", type=_int_arg(0), default=1, help="seed of the random inputs")
    p.add_argument("--json", metavar="FILE", type=_output_arg(),
                   help="write the results as JSON")


def cmd_docs(args):
    from sim.system import figures
    from t3.docs import refresh
    stale = refresh(write=not args.check) + figures.refresh(write=not args.check)
    for page in stale:
        print(f"{'stale' if args.check else 'updated'}: {page}")
    if not stale:
        print("every register table and paper figure in docs/ is current")
    progress = _key_progress()
    old = figures.stale_results(progress=progress)
    for line in old:
        print(f"stale: {line}")
    if not args.check and not old:
        for path in figures.restamp(progress=progress):
            print(f"stamped: {path} (what its runs ran is today's: the next check is quick)")
    return 1 if (args.check and stale) or old else 0


def _key_progress():
    """A ``progress(done, total)`` that shows a bar on standard error while the records' keys
    are computed (seconds when their digests are cached; the first check after a change of
    the hardware exports each ring once)."""
    import sys
    from tqdm import tqdm
    bars = {}

    def progress(done, total):
        bar = bars.get("bar")
        if bar is None or bar.total != total or bar.n >= total:
            if bar is not None:
                bar.close()
            bar = bars["bar"] = tqdm(total=total, desc="the records' digests to compute",
                                     file=sys.stderr, leave=False,
                                     mininterval=0.1 if sys.stderr.isatty() else 10)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()
    return progress


def _blocks_arg(text):
    from benchmarks.fpga import KNOWN as known
    names = text.split(",")
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"blocks: {name!r} is not one of "
                                             f"{', '.join(known)}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"blocks must differ, not {text!r}")
    return text


def _freq_arg(text):
    """An argparse ``type``: the clock asked of place and route, MHz in (0, 1000]."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1000:          # nan fails both
        raise argparse.ArgumentTypeError(f"must be a number of MHz in (0, 1000], not {text!r}")
    return value


#: ``t3 bench``'s figures: each a module of ``benchmarks/`` with a ``main``.
BENCHMARKS = ("tracker", "mc_arbiter", "nmc", "dma", "linklayer", "system", "fpga")


def cmd_bench(args):
    import importlib
    bench = importlib.import_module(f"benchmarks.{args.block}")
    if args.block == "fpga":
        return bench.main(blocks=args.blocks.split(",") if args.blocks else bench.DEFAULT_BLOCKS,
                          seeds=args.seed or (1,))
    if args.blocks or args.seed:
        print(f"t3 bench: --{'blocks' if args.blocks else 'seed'} is for 'fpga' only",
              file=sys.stderr)
        sys.exit(2)                     # a usage error, as argparse's own

    return bench.main(sims=args.sims.split(",") if args.sims else None, synth=not args.no_synth)


def _topology_args(parser):
    g = parser.add_argument_group("topology and collective (docs/collectives.md)")
    g.add_argument("--topology", choices=TOPOLOGIES, default="ring",
                   help="ring (default), or mesh: every GPU linked to every other by a "
                        "dedicated link each way (paper section 7.1)")
    g.add_argument("--collective", choices=COLLECTIVES, default="ring",
                   help="ring (default: the ring reduce-scatter, on either topology); on a "
                        "mesh: direct (the direct reduce-scatter: each GPU's GEMM stores every "
                        "other GPU's chunk into its owner's memory; needs --inputs integers), "
                        "all-to-all (each other GPU's chunk sent to it, not written locally; "
                        "no all-gather); on either: all-reduce (the RS, then an all-gather by "
                        "track and trigger in the same kernel, no CU; on a mesh the direct RS, "
                        "which needs --inputs integers)")
    g.add_argument("--inputs", choices=("normal", "integers"), default="normal",
                   help="the GEMM's inputs: normal (default), or integers from {-1, 0, 1}, "
                        "whose sums are exact in any order (the direct collective's check)")


def _timeline_period_arg(parser, what):
    """``--timeline-period``: the cycles between a run's timeline samples (50 to 2^20)."""
    parser.add_argument("--timeline-period", type=_int_arg(50, 1 << 20), default=500,
                        metavar="CYCLES", help=f"cycles between {what} (default 500)")


def build_parser():
    """The ``t3`` command's parser: every option's value is checked by its ``type`` while the
    command line is read, before any build, job or simulation (a file or folder the command
    writes by :func:`_output_arg` or :func:`_folder_arg`, which carry ``writes``)."""
    parser = argparse.ArgumentParser(prog="t3", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the Tracker through one ring reduce-scatter step")
    demo.add_argument("--sim", choices=DEMO_SIMULATORS,
                      help="simulator (default: $SIM, else verilator)")
    demo.add_argument("--wgs", type=_int_arg(1), default=128, help="workgroups (default 128)")
    demo.add_argument("--wfs", type=_int_arg(1), default=4,
                      help="wavefronts per workgroup (default 4)")
    demo.add_argument("--tile-elems", type=_int_arg(16, multiple=16), default=256,
                      help="fp16 elements per wavefront tile, a multiple of 16 (default 256)")
    demo.add_argument("--seed", type=_int_arg(0), default=1)
    demo.add_argument("--wave", metavar="FILE", type=_output_arg(".vcd", ".fst"),
                      help="write a waveform for GTKWave or Surfer (FST from icarus, VCD "
                           "otherwise)")
    _tracker_args(demo)
    _system_args(demo)
    demo.set_defaults(func=cmd_demo)

    export = sub.add_parser("export", help="write a block's Verilog")
    export_sub = export.add_subparsers(dest="block", required=True)
    for name, (top, add_args, _) in exportable().items():
        p = export_sub.add_parser(name, help=f"module {top}")
        p.add_argument("--out", required=True, metavar="DIR", type=_folder_arg,
                       help="output folder (made if missing)")
        add_args(p)
        _system_args(p)
        p.set_defaults(func=cmd_export)

    synth = sub.add_parser("synth", help="place and route a block on an FPGA: resources, "
                                          "Fmax, critical path")
    targets = synth.add_subparsers(dest="target", required=True)
    from hw.pnr import FAMILIES, TARGETS

    def pnr_args(p, several=True):
        if several:
            p.add_argument("--seed", type=_seeds_arg, default=(1,), metavar="N[,N...]",
                           help="nextpnr's seed, or several: each placed, the slowest reported")
            p.add_argument("--jobs", type=_int_arg(1, 16), default=1, metavar="N",
                           help="seeds placed at once, 1 to 16, each its own Yosys and "
                                "nextpnr and a core (default 1; the node's take about 40 "
                                "minutes each)")
        else:
            p.add_argument("--seed", type=_int_arg(1), default=1, help="nextpnr's seed")
        p.add_argument("--json", metavar="FILE", type=_output_arg(".json"),
                       help="write the figures as JSON (with several seeds: every seed's, "
                            "and which was slowest)" if several else
                       "write the figures as JSON")

    for target, t in TARGETS.items():
        how = "its ports on two pins" if t.wrap else "out of context"
        synth_sub = targets.add_parser(target, help=f"a block on an {t.device}, {how}") \
            .add_subparsers(dest="block", required=True)
        for name, (top, add_args, _) in exportable().items():
            p = synth_sub.add_parser(name, help=f"module {top}")
            p.add_argument("--freq", type=_freq_arg, default=100.0, metavar="MHZ",
                           help="the clock asked of place and route (default 100)")
            p.add_argument("--timeout", type=_int_arg(1), default=10_800, metavar="SECONDS",
                           help="give each tool (Yosys, nextpnr) this long, wall clock "
                                "(default 10800: the node with its L2 takes about 4,600 s "
                                "of nextpnr on an idle core)")
            p.add_argument("--paths", type=_int_arg(0, FAMILIES), default=10, metavar="N",
                           help="print the N worst families of paths, every endpoint's "
                                f"slack against the clock asked (default 10, at most "
                                f"{FAMILIES}; docs/fpga.md)")
            pnr_args(p)
            add_args(p)
            _system_args(p)
            p.set_defaults(func=cmd_synth)

    p = targets.add_parser("board", help="the ULX3S-85F board's bitstream: two GPUs in a "
                                         "ring and a serial port (docs/fpga.md)")
    p.add_argument("--out", required=True, metavar="DIR", type=_folder_arg,
                   help="output folder (made if missing): t3_board.bit and the build's files")
    pnr_args(p, several=False)
    _board_args(p)
    from system.board import BoardParams
    p.add_argument("--clock", type=_freq_arg, default=None, metavar="MHZ",
                   help=f"the design's clock, made by the ECP5's PLL from the board's 25 MHz "
                        f"oscillator (default {BoardParams.clock_hz / 1e6:g}; 25 * CLKFB_DIV "
                        f"/ CLKI_DIV exactly, others refused with the nearest it makes)")
    p.set_defaults(func=cmd_synth_board)

    board = sub.add_parser("board", help="a GEMM -> reduce-scatter -> all-gather on the board "
                                         "from this PC, checked bit for bit")
    board_sub = board.add_subparsers(dest="action", required=True)
    for action, text in (("run", "on a ULX3S with t3 synth board's bitstream, over its "
                                 "serial port"),
                         ("sim", "against the board core in simulation, through its serial "
                                 "pins")):
        p = board_sub.add_parser(action, help=text)
        if action == "run":
            p.add_argument("--port", required=True,
                           help="the board's serial port (e.g. /dev/ttyUSB0)")
        p.add_argument("--config", choices=CONFIGS, default="t3",
                       help="configuration (default t3)")
        p.add_argument("--k", type=_int_arg(1), default=32,
                       help="the GEMM's K (default 32; M = 16 and N = 32 on two GPUs)")
        p.add_argument("--seed", type=_int_arg(0), default=1)
        if action == "run":
            _board_args(p)
        p.set_defaults(func=cmd_board)

    run = sub.add_parser("run", help="one configuration of the N-GPU system, end to end")
    _workload_args(run)
    run.add_argument("--memory-rows", type=_int_arg(1), default=None,
                     help=f"HBM rows per bank of every node (default {MEMORY_ROWS}, 128 KiB, "
                          f"up to 8 GPUs, then 16, 32 and 64 up to 16, 32 and 64 GPUs, twice "
                          f"as many for a workload that needs it, as the default one does "
                          f"from 5 GPUs; with a preset 64, 128 at TP 32)")
    run.add_argument("--config", choices=CONFIGS, default="t3",
                     help="configuration (default t3)")
    run.add_argument("--wave", metavar="FILE", type=_output_arg(".vcd", ".fst"),
                     help="write a waveform for GTKWave or Surfer, in the format its suffix "
                          "names (Verilator: .vcd or .fst; Icarus: .fst), and beside it "
                          "FILE.gtkw, a GTKWave save file grouping each block's ports")
    run.add_argument("--wave-scope", metavar="PATH", default=None,
                     help="only this instance of the ring and what is below it in the wave: "
                          "gpu1, gpu1.node.dma, link0 (default: the whole ring)")
    run.add_argument("--timeline", metavar="FILE",
                     type=_output_arg(".png", ".svg", ".pdf", ".json"),
                     help="draw every GPU's GEMM stage, link use, MCQ entries by stream, "
                          "Tracker entries and GEMM stalls over time (PNG, SVG or PDF; the "
                          "samples go beside it as FILE.json; or .json for the samples alone)")
    _timeline_period_arg(run, "timeline and trace samples")
    run.add_argument("--trace", metavar="FILE", type=_output_arg(".json"),
                     help="write a trace for Perfetto or chrome://tracing: every GPU's phases, "
                          "GEMM stages, ring steps received, link use, MCQ and Tracker "
                          "entries and GEMM stalls (sampled as --timeline is)")
    g = run.add_argument_group("link layer (docs/linklayer.md)")
    g.add_argument("--link-layer", action="store_true",
                   help="every node's DMA engine talks to its links through the link layer "
                        "(CRC-32, sequence numbers, ACK/NAK, replay)")
    g.add_argument("--link-faults", type=_fault_rate_arg, metavar="RATE", default=None,
                   help="with --link-layer: hit every link's beats and acknowledgements at "
                        "random with probability RATE per beat (e.g. 1e-3; 6e-8 to 0.5)")
    g.add_argument("--fault-kinds", type=_fault_kinds_arg, default=None,
                   metavar="KIND,...",
                   help="with --link-faults: which faults, of drop, flip, dup (default all)")
    _topology_args(run)
    _charge_headers_arg(run)
    run.set_defaults(func=cmd_run)

    compare = sub.add_parser("compare", help="all configurations: the paper's Figure 16 and "
                                             "18 views")
    _workload_args(compare)
    compare.add_argument("--plot", metavar="FILE", type=_output_arg(".png", ".pdf", ".svg"),
                         help="save both views as a figure (PNG, PDF or SVG by the file's "
                              "suffix)")
    compare.add_argument("--trace", metavar="FILE", type=_output_arg(".json"),
                         help="write every configuration's run as one trace for Perfetto or "
                              "chrome://tracing, side by side (t3 run --trace's tracks)")
    _timeline_period_arg(compare, "--trace's samples")
    _topology_args(compare)
    _charge_headers_arg(compare)
    compare.set_defaults(func=cmd_compare)

    paper = sub.add_parser("paper", help="the paper's evaluation on the RTL: Figures 16 and 18 "
                                          "(every run verified), a report with plots")
    paper.add_argument("--cases", default="fig16",
                       help="fig16 (default: the 16 sub-layer cases of Figure 16), tp32, all, "
                            "or comma-separated case names (e.g. T-NLG-FC-1-TP16)")
    paper.add_argument("--configs", default=None,
                       help="comma-separated runs among sequential, t3, t3-mca, rs-nmc "
                            "(default all; sequential is always run, the speedups are over it)")
    paper.add_argument("--scale", type=_scale_arg, default=0.5,
                       help="size of the scaled GPU, 0 < SCALE <= 1: 8 x SCALE CUs, and the WGs "
                            "per ring step with them (default 0.5: 7 minutes on 2 cores with the "
                            "rings built, the 16-GPU runs the longest; run time grows with the "
                            "scale)")
    paper.add_argument("--out", default="paper-report", metavar="DIR", type=_folder_arg,
                       help="report folder: report.md, figure16/18 .png and .svg, results.json "
                            "(default paper-report)")
    paper.add_argument("--scheduler", metavar="ADDRESS", type=_scheduler_arg,
                       help="a running Dask scheduler (e.g. tcp://host:8786); default: a "
                            "local cluster")
    paper.add_argument("--workers", type=_int_arg(1, 64), default=2,
                       help="worker processes of the local cluster (default 2)")
    paper.add_argument("--cache", metavar="DIR", type=_folder_arg,
                       help="results cache (default ~/.cache/t3-results): a re-run only runs "
                            "what changed or failed")
    paper.add_argument("--no-cache", action="store_true", help="run every job")
    paper.add_argument("--sim", choices=SIMULATORS,
                       help="simulator (default: $SIM, else verilator)")
    paper.add_argument("--record", action="store_true",
                       help="keep the results as docs/results/paper-SCALE.json with the key "
                            "of what they ran and regenerate docs/paper.md's tables from them "
                            "(Figure 16 cases with every run, at a committed scale: 0.5 or 1; "
                            "a current record keeps its other cases, so a long set can be "
                            "recorded a few cases at a time)")
    paper.add_argument("--figure17", action="store_true",
                       help="Figure 17's case (T-NLG FC-2, TP 8) in Sequential, T3 and T3-MCA "
                            "with timelines: figure17.png and .json in --out (with --record, "
                            "docs/results/figure17-SCALE.*)")
    paper.add_argument("--trace", metavar="DIR", type=_folder_arg,
                       help="write a trace per case into DIR (CASE.json), its runs side by side "
                            "(t3 run --trace's tracks; the runs sample their timelines, which "
                            "leaves their cycles as they are)")
    _timeline_period_arg(paper, "--trace's samples")
    paper.set_defaults(func=cmd_paper)

    sweep = sub.add_parser("sweep", help="one workload over values of workload and hardware "
                                          "parameters, every run a Dask job, verified")
    _workload_args(sweep)
    sweep.add_argument("--vary", action="append", metavar="NAME=V1,V2,...",
                       help="a parameter and its values (repeat for a grid): m, n, k, cus, "
                            "wfs_per_wg, dtype, flops_per_cycle (the scaled GPU's flop "
                            "rate), k_slice (elements of K a WG streams at a time; 0: whole "
                            "panels), link_bw (NUM/DEN), link_latency, "
                            "link_headers (charged or free), mcq_depth, memory_rows, l2_ways "
                            "(0: no L2), l2_mshrs, l2_depth, dma_buffer (beats), "
                            "dram_scheduler (in-order, bank-parallel or fr-fcfs)")
    sweep.add_argument("--configs", default="sequential,t3,t3-mca",
                       help="comma-separated among sequential, t3, t3-mca, rs-nmc, or all "
                            "(default sequential,t3,t3-mca)")
    sweep.add_argument("--scheduler", metavar="ADDRESS", type=_scheduler_arg,
                       help="a running Dask scheduler; default: a local cluster")
    sweep.add_argument("--workers", type=_int_arg(1, 64), default=2,
                       help="worker processes of the local cluster (default 2)")
    sweep.add_argument("--cache", metavar="DIR", type=_folder_arg,
                       help="results cache (default ~/.cache/t3-results)")
    sweep.add_argument("--trace", metavar="DIR", type=_folder_arg,
                       help="write a trace per point into DIR, its configurations side by "
                            "side (t3 run --trace's tracks; the runs sample their timelines)")
    _timeline_period_arg(sweep, "--trace's samples")
    sweep.add_argument("--no-cache", action="store_true", help="run every job")
    sweep.set_defaults(func=cmd_sweep)

    bench = sub.add_parser("bench", help="print a block's figures")
    bench.add_argument("block", choices=BENCHMARKS)
    bench.add_argument("--blocks", type=_blocks_arg,
                       help="fpga: comma-separated blocks to place and route (default "
                            "tracker,mc_arbiter,dma,nmc; node, node-l2 with the paper "
                            "rings' L2, and board, the ULX3S bitstream at its clock, take "
                            "tens of minutes)")
    bench.add_argument("--seed", type=_seeds_arg, default=None, metavar="N[,N...]",
                       help="fpga: nextpnr's seed, or several: each placed, the slowest "
                            "reported (default 1)")
    bench.add_argument("--sims", help="comma-separated simulators (default: all of the block's)")
    bench.add_argument("--no-synth", action="store_true",
                       help="skip the FPGA resource figures (Yosys synthesis, ~1 minute)")
    bench.set_defaults(func=cmd_bench)

    docs = sub.add_parser("docs", help="regenerate the register tables in docs/ from the "
                                        "register definitions and the paper tables from "
                                        "docs/results/; report a record whose runs would "
                                        "not run the same today, naming what moved")
    docs.add_argument("--check", action="store_true",
                      help="only report stale pages (exit 1 if any, or if what a results "
                           "file's runs ran has moved)")
    docs.set_defaults(func=cmd_docs)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    from hw.pnr import DoesNotFit, TimedOut, ToolFailed
    try:
        return args.func(args)
    except ValueError as error:
        parser.exit(2, f"t3: error: {error}\n")
    except (DoesNotFit, TimedOut, ToolFailed) as error:  # a tool's verdict (t3 bench fpga's)
        print(f"t3: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
