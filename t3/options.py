"""What the ``t3`` commands share: their options' types (each checks its value while the command
line is read, before any build, job or simulation), the system's widths, and the workload,
topology and ring options of ``t3 run``, ``t3 compare`` and ``t3 sweep``."""

import argparse
import dataclasses
import os
import socket
import tempfile
from pathlib import Path

from hw.params import T3Params, check_int
from sim.harness.runner import SIMULATORS
from sim.system.run import COLLECTIVES
from system.ring import MAX_GPUS, TOPOLOGIES


__all__ = ["seeds_arg", "int_arg", "output_arg", "SCHEDULER_SCHEMES", "scheduler_arg", "scale_arg",
           "folder_arg", "param_args", "given", "SYSTEM_ARGS", "param_fields", "system_args",
           "system_params", "charge_headers_arg", "freq_arg", "timeline_period_arg", "check_wave",
           "workload_args", "workload_and_ring", "topology_args", "with_topology", "scale_line"]


def seeds_arg(text):
    """An argparse ``type``: one seed or a comma-separated list of distinct seeds, each >= 1."""
    parse = int_arg(1)
    seeds = tuple(parse(part) for part in text.split(","))
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must differ, not {text!r}")
    return seeds


def int_arg(lo=None, hi=None, multiple=None):
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


def output_arg(*suffixes):
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


def scheduler_arg(text, timeout=5.0):
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


def scale_arg(text):
    """An argparse ``type``: the paper runs' scale, a number in (0, 1]."""
    from sim.system.workload import scaled_cus
    try:
        value = float(text)
        scaled_cus(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], not {text!r}") from None
    return value


def folder_arg(text):
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


folder_arg.writes = "folder"


def param_args(parser, title, cls, names, dest_prefix=""):
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


def given(args, names, dest_prefix=""):
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


def system_args(parser):
    param_args(parser, "system widths", T3Params, SYSTEM_ARGS)


def system_params(args):
    return T3Params(**given(args, SYSTEM_ARGS))


def charge_headers_arg(group):
    group.add_argument("--charge-headers", action="store_true",
                       help="a link packet's header costs a beat of the link's bandwidth "
                            "(default: headers free, as the paper's link model)")


def freq_arg(text):
    """An argparse ``type``: the clock asked of place and route, MHz in (0, 1000]."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1000:          # nan fails both
        raise argparse.ArgumentTypeError(f"must be a number of MHz in (0, 1000], not {text!r}")
    return value


def timeline_period_arg(parser, what):
    """``--timeline-period``: the cycles between a run's timeline samples (50 to 2^20)."""
    parser.add_argument("--timeline-period", type=int_arg(50, 1 << 20), default=500,
                        metavar="CYCLES", help=f"cycles between {what} (default 500)")


def check_wave(args):
    """A waveform's suffix names its format, which the simulator must write (Verilator VCD
    or FST, Icarus FST); ``--wave-scope`` needs a wave and an instance of the ring."""
    from sim.harness.runner import default_sim
    from sim.system.run import check_wave
    scope = getattr(args, "wave_scope", None)
    try:
        check_wave(args.wave, args.sim or default_sim(), scope, getattr(args, "gpus", None))
    except ValueError as error:
        raise ValueError(f"--{error}".replace("--wave_scope", "--wave-scope")) from None


def workload_args(p):
    from sim.system.workload import PRESETS
    g = p.add_argument_group("workload (default: a 64 x 32*gpus GEMM whose K balances GEMM "
                             "and RS)")
    g.add_argument("--gpus", type=int_arg(2, MAX_GPUS), default=None,
                   help=f"GPUs in the ring, 2 to {MAX_GPUS} (default 4; with --preset, its TP "
                        f"degree, no other)")
    g.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                   help="a Table 2 sub-layer, scaled (docs/paper.md) and run on a ring of its "
                        "TP degree: " + ", ".join(sorted(PRESETS)))
    g.add_argument("--tokens", type=int_arg(1), default=None,
                   help="with --preset: a small-token step of its sub-layer (the generation "
                        "phase, paper section 7.3): that many tokens, fewer than its SL x B "
                        "(docs/collectives.md)")
    g.add_argument("--scale", type=scale_arg, default=None,
                   help="with --preset: size of the scaled GPU, 0 < SCALE <= 1, 8 x SCALE CUs "
                        "(default 1; t3 paper's default is 0.5)")
    g.add_argument("--m", type=int_arg(1), help="rows of the output (default 64)")
    g.add_argument("--n", type=int_arg(1), help="columns of the output (default 32 x gpus)")
    g.add_argument("--k", type=int_arg(1), help="inner dimension per GPU (default: balanced)")
    g.add_argument("--dtype", choices=("fp16", "fp32"), help="element type (default fp16)")
    p.add_argument("--sim", choices=SIMULATORS,
                   help="simulator (default: $SIM, else verilator)")
    p.add_argument("--seed", type=int_arg(0), default=1, help="seed of the random inputs")
    p.add_argument("--json", metavar="FILE", type=output_arg(),
                   help="write the results as JSON")


def workload_and_ring(args):
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


def topology_args(parser):
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


def with_topology(args, spec, ring):
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


def scale_line(spec, gpus, ring):
    from sim.system.run import LINK_LATENCY, describe_scale
    return f"  scale      {describe_scale(spec, gpus, ring.get('latency', LINK_LATENCY))}"
