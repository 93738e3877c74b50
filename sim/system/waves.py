"""A GTKWave save file for a ring's waveform (``t3 run --wave FILE`` writes ``FILE.gtkw``).

Opening ``gtkwave FILE.gtkw`` loads the wave with every block's ports already on screen: one
collapsible group per block instance of the dumped scope, down to a node's blocks (each GPU,
its engine and node, the node's Tracker, DMA, NMC, arbiter and L2; each link; with a scope
inside a block, that block's parts), holding that instance's input and output ports
(clock and reset first), single bits in binary and vectors in hex.  The groups come from the
exported Verilog the run was built from (:func:`sim.harness.runner.instance_tree` and the
ports each module declares), so they match the design, not a hand-kept list.

The signal names are the wave's own: :func:`write` reads the wave's hierarchy (pywellen, the
reader Surfer is built on) and lists the ports it holds under the path it holds them at
(Verilator's VCD nests the design under ``TOP``, its FST and Icarus's do not).  Surfer opens
the wave itself (``surfer FILE``); its own state files are not GTKWave's, so there the blocks
are picked from the scope tree.
"""

import re
from pathlib import Path

from sim.harness.runner import instance_tree


__all__ = ["module_ports", "block_groups", "wave_names", "save_file", "write"]


#: Submodules that are plumbing, not blocks: register slices and stream buffers, queues,
#: bus decoders (their ports repeat their parent's).
PLUMBING = re.compile(r"(_in|_out|_slice|^q|^fifo|^decoder|^axil|^order|^pend|^stq|^egress)$")

#: GTKWave trace flags: a bit in binary, a vector in hex; the group's open and close markers.
BIN, HEX, GROUP_OPEN, GROUP_CLOSE = "@28", "@22", "@800200", "@1000200"


def module_ports(source):
    """``{module: [(port, width), ...]}`` of every module of the Verilog ``source``, in the
    order the module declares them; ports the export names after Amaranth's internal nets
    (``\\port$12$0``) are left out."""
    text = Path(source).read_text()
    ports = {}
    for match in re.finditer(r"^module (\\?\S+?)\s*\((.*?)^endmodule", text, re.M | re.S):
        name, body = match.group(1).lstrip("\\"), match.group(2)
        ports[name] = [
            (m.group(4), int(m.group(2)) - int(m.group(3)) + 1 if m.group(2) else 1)
            for m in re.finditer(r"^\s*(input|output|inout)\s+(?:\[(\d+):(\d+)\]\s*)?"
                                 r"([A-Za-z_][A-Za-z0-9_]*)\s*;", body, re.M)]
    return ports


def block_groups(source, toplevel, scope=None):
    """``[(instance path, [(port, width), ...])]``: each block instance of ``scope`` (a dotted
    path below ``toplevel``; default the whole design) and below it whose module declares
    ports, down to the blocks of a node (``gpu1.node.dma``; with a deeper scope, its own
    parts), :data:`PLUMBING` left out, in the design's order, clock and reset first."""
    tree = instance_tree(source, toplevel)
    ports = module_ports(source)
    prefix = f"{scope}." if scope else ""
    depth = max(2, scope.count(".") + 1) if scope else 2
    groups = []
    for path, module in tree.items():
        if scope and not (path == scope or path.startswith(prefix)):
            continue
        if path.count(".") > depth:
            continue
        if PLUMBING.search(path.rsplit(".", 1)[-1]) and path != scope:
            continue
        own = ports.get(module, [])
        if not own:
            continue
        first = [p for p in own if p[0] in ("clk", "rst")]
        groups.append((path, first + [p for p in own if p not in first]))
    return groups


def wave_names(wave):
    """The full names of every signal in the waveform file ``wave`` (VCD or FST)."""
    import pywellen
    return {var.full_name for var in pywellen.Waveform(str(wave)).all_vars()}


def save_file(wave, source, toplevel, names, scope=None):
    """The text of a GTKWave save file that opens ``wave`` with :func:`block_groups`, each
    port under the path the wave's signal ``names`` hold it at (a port the wave lacks, and a
    group left empty, are not listed)."""
    root = next((n.split(f".{toplevel}.")[0] + f".{toplevel}" for n in sorted(names)
                 if f".{toplevel}." in f".{n}" and not n.startswith(f"{toplevel}.")),
                toplevel)
    lines = ["[*] GTKWave save file written by t3 run (sim/system/waves.py)",
             f'[dumpfile] "{Path(wave).resolve()}"', "[timestart] 0"]
    lines += [f"[treeopen] {'.'.join(root.split('.')[:i + 1])}."
              for i in range(root.count(".") + 1)]
    for path, own in block_groups(source, toplevel, scope):
        listed = [(port, width) for port, width in own if f"{root}.{path}.{port}" in names]
        if not listed:
            continue
        lines += [GROUP_OPEN, f"-{path}"]
        for port, width in listed:
            name = f"{root}.{path}.{port}" + (f"[{width - 1}:0]" if width > 1 else "")
            lines += [BIN if width == 1 else HEX, name]
        lines += [GROUP_CLOSE, f"-{path}"]
    return "\n".join(lines) + "\n"


def write(result, scope=None):
    """Write ``<wave>.gtkw`` beside ``result["wave"]`` (a :func:`sim.system.run.run_config`
    result, its design in ``result["wave_design"]``); returns its path."""
    wave, source = result["wave"], result["wave_design"]
    toplevel = Path(source).name.split(".")[0]
    path = Path(f"{wave}.gtkw")
    path.write_text(save_file(wave, source, toplevel, wave_names(wave), scope))
    return path
