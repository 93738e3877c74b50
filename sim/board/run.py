"""Run the board's host program against the board core in simulation (``tests/test_board.py``,
``t3 board sim``), or against a real board over a serial port (``t3 board run``)."""

import asyncio
import dataclasses

from sim.system.workload import GemmSpec


__all__ = ["BOARD_SPEC", "sim_board", "check_board_config", "simulate_board", "run_on_board"]


#: The GEMM the board runs by default: each GPU's 16 x 32 fp16 output, K = 32, two 16 x 16
#: tiles per GPU per chunk; it fits the board's engine memories and 16 KiB HBM models.
BOARD_SPEC = GemmSpec(m=16, n=32, k=32, dtype="fp16", wfs_per_wg=1, cus=2)


def sim_board(bparams=None):
    """The board of the simulation: ``bparams`` (default the real board's) at 8 clock cycles
    per serial bit, which keeps the line from dominating the simulation (at the board's
    115,200 baud a bit is 217 cycles)."""
    from system.board import BoardParams
    bparams = bparams or BoardParams()
    return dataclasses.replace(bparams, baud=bparams.clock_hz // 8)




def check_board_config(spec, config, bparams):
    """Refuse a run the board cannot hold, naming the field, before any build."""
    from sim.system.run import check_config
    if config == "sequential" and spec.dtype not in bparams.engine_formats:
        raise ValueError(f"config 'sequential' adds on the engines, and the board's "
                         f"engine_formats {bparams.engine_formats!r} has no {spec.dtype} adders "
                         f"(its reduce-scatter runs on the near-bank ALUs: use t3 or t3-mca)")
    check_config(spec, bparams.gpus, config, bparams.params, bparams.nparams, bparams.engine)


def simulate_board(spec=BOARD_SPEC, config="t3", *, bparams=None, sim=None, seed=1,
                   build_dir=None, cache=True):
    """The host program against :class:`system.board.BoardCore` exported and simulated
    (cocotb on its serial pins); returns the run's result dict (``verified``, the phases'
    cycles, ``serial_commands``, ``leds``, ``sim_cycles``)."""
    import sim.board.cocotb_tests as tb
    from sim.harness.runner import default_sim, design_key, run_for_result
    from system.board import BoardCore
    bparams = sim_board(bparams)
    check_board_config(spec, config, bparams)
    sim = sim or default_sim()
    key = design_key(BoardCore, bparams.to_dict()) if cache else None
    return run_for_result(lambda: BoardCore(bparams), "t3_board", tb.__name__, "run_board",
                          {"board": bparams.to_dict(), "spec": spec.__dict__,
                           "config": config, "seed": seed}, sim, build_dir, cache_key=key,
                          cxx_opt="-O1")


def run_on_board(port, spec=BOARD_SPEC, config="t3", *, bparams=None, seed=1, progress=None):
    """The host program against a board on serial ``port``; returns the result dict."""
    from sim.board.host import SerialLine, board_host
    from sim.system.workload import Workload
    from system.board import BoardParams
    bparams = bparams or BoardParams()
    check_board_config(spec, config, bparams)
    line = SerialLine(port, bparams.baud)
    try:
        wl = Workload(spec, bparams.gpus, bparams.params, seed=seed)
        system = board_host(line, bparams, wl, config, progress=progress)
        verified = asyncio.run(system.run())
        return dict(system.results(), verified=verified)
    finally:
        line.close()
