"""``t3 board``: a GEMM -> reduce-scatter -> all-gather on the ULX3S board from this PC, or against
the board in simulation."""

import sys
import time

from sim.system.configure import CONFIGS
from t3.options import int_arg


def add_parser(sub):
    """Add ``t3 board`` to the subcommands ``sub``."""
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
        p.add_argument("--k", type=int_arg(1), default=32,
                       help="the GEMM's K (default 32; M = 16 and N = 32 on two GPUs)")
        p.add_argument("--seed", type=int_arg(0), default=1)
        if action == "run":
            board_args(p)
        p.set_defaults(func=cmd_board)


def board_params(args):
    from system.board import BoardParams
    clock_mhz = getattr(args, "clock", None)
    return BoardParams(baud=getattr(args, "baud", BoardParams.baud),
                       clock_hz=BoardParams.clock_hz if clock_mhz is None else
                       round(clock_mhz * 1e6))


def board_args(p):
    p.add_argument("--baud", type=int_arg(1200), default=115_200,
                   help="the serial port's bits per second (default 115200)")


def cmd_board(args):
    from sim.board.run import BOARD_SPEC, run_on_board, simulate_board
    from sim.system.workload import GemmSpec
    bparams = board_params(args)
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
