"""The node's blocks as entries of one registry (:mod:`system.blocks`): what the node, the
command line, the benchmarks and the docs iterate, and what adding a block takes."""

import dataclasses
import re

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.csr import Reg, RegisterMap
from hw.params import T3Params, check_params, param
from l2.config import L2Params
from linklayer.config import LinkLayerParams
from system.blocks import BLOCKS, Block, register
from system.node import BLOCK_ORDER, NodeParams, block_registers
from t3.cli import main


@dataclasses.dataclass(frozen=True)
class ToyParams:
    width: int = param(8, "the toy's width", 1, 64)

    def __post_init__(self):
        check_params(self)


def toy_registers(params, tparams):
    return RegisterMap([Reg("info", 32, "ro", "the toy's width")])


class Toy(wiring.Component):
    """A register of ``width`` bits and its register map: the least a block is."""

    def __init__(self, params, tparams):
        self.tparams = tparams
        self.regs = toy_registers(params, tparams)
        super().__init__({"i": In(tparams.width), "o": Out(tparams.width)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.o.eq(self.i)
        return m


TOY = Block("toy", "t3_toy", ToyParams, "toy", "toy", Toy, toy_registers, "docs/toy.md")


def test_a_block_in_the_registry_is_exported_placed_and_benchmarked(monkeypatch, tmp_path,
                                                                    capsys):
    """Adding a block is its package and its entry here (and, for a node to have it, its
    ``NodeParams`` field, window and wiring in ``system/node.py``: ``docs/layout.md``): the
    toy entered here is ``t3 export``'s and ``t3 synth``'s, an option per field of its
    parameters, refused out of range naming the field, and ``t3 bench fpga``'s."""
    from benchmarks.fpga import build
    from t3.cli import build_parser
    monkeypatch.setitem(BLOCKS, "toy", TOY)
    assert main(["export", "toy", "--width", "12", "--out", str(tmp_path)]) == 0
    verilog = (tmp_path / "t3_toy.v").read_text()
    assert re.search(r"^module t3_toy\(", verilog, re.M)
    assert re.search(r"input \[11:0\] i;", verilog)
    assert "`info`" in (tmp_path / "t3_toy_registers.md").read_text()
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "toy", "--width", "65", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        "t3: error: width must be an integer from 1 to 64, not 65"
    args = build_parser().parse_args(["synth", "ecp5", "toy", "--width", "3"])
    assert args.block == "toy" and args.width == 3
    import gc
    import warnings
    from amaranth.hdl import UnusedElaboratable
    with warnings.catch_warnings():         # built to look at, never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        component, top = build("toy")
        assert isinstance(component, Toy) and top == "t3_toy" and component.tparams.width == 8
        del component
        gc.collect()


def test_the_registry_is_the_nodes_blocks_in_their_windows_order():
    """Every block has a window of the node's configuration space, in the registry's order;
    a node's register maps are its own and those of the blocks it has."""
    assert list(BLOCKS) == ["tracker", "mc_arbiter", "nmc", "dma", "l2", "linklayer"]
    windows = [block.window for block in BLOCKS.values()]
    assert [w for w in BLOCK_ORDER if w in windows] == windows
    assert set(BLOCK_ORDER) - set(windows) == {"node", "gpu"}
    plain = NodeParams()
    assert list(block_registers(T3Params(), plain)) == ["node", "tracker", "arbiter", "nmc",
                                                        "dma"]
    full = NodeParams(l2=L2Params(), linklayer=LinkLayerParams())
    assert list(block_registers(T3Params(), full))[-2:] == ["l2", "link"]
    assert NodeParams.from_dict(full.to_dict()) == full
    assert NodeParams.from_dict(plain.to_dict()) == plain


def test_a_block_whose_name_field_or_window_is_taken_is_refused():
    for changes, message in (({"name": "tracker"}, "name 'tracker' is block tracker's"),
                             ({"node_field": "arbiter"},
                              "node_field 'arbiter' is block mc_arbiter's"),
                             ({"window": "link"}, "window 'link' is block linklayer's"),
                             ({"top": "t3_l2"}, "top 't3_l2' is block l2's")):
        with pytest.raises(ValueError) as error:
            register(dataclasses.replace(TOY, **changes))
        assert str(error.value) == f"block {changes.get('name', 'toy')}: {message}"
    assert "toy" not in BLOCKS


def test_t3_bench_offers_every_benchmark():
    """``t3 bench``'s choices are the modules of ``benchmarks/`` with a ``main``."""
    import importlib
    import pkgutil
    import benchmarks
    from t3.commands.bench import BENCHMARKS
    found = {m.name for m in pkgutil.iter_modules(benchmarks.__path__)
             if hasattr(importlib.import_module(f"benchmarks.{m.name}"), "main")}
    assert found == set(BENCHMARKS)
