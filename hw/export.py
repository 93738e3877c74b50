"""Verilog export of any T3 block.

Every top gets its own module name (``t3_tracker``, ``t3_nmc``, ...) so that several blocks can
be compiled into one simulation or FPGA project, and the output carries no source-path
attributes, so it is the same on every machine.  Ports are named the way Amaranth flattens a
component's signature: ``i__valid``, ``i__ready``, ``i__payload`` (the payload is one vector laid
out as the ``data.StructLayout`` says, first field in the least significant bits), plus ``clk``
and ``rst`` (synchronous, active high).
"""

from pathlib import Path

from amaranth.back import verilog


__all__ = ["to_verilog", "write_verilog"]


def to_verilog(component, name):
    """Verilog text of ``component`` as a module called ``name``."""
    if not name.isidentifier():
        raise ValueError(f"Verilog module name must be an identifier, not {name!r}")
    return verilog.convert(component, name=name, emit_src=False)


def write_verilog(component, name, out_dir):
    """Write ``<out_dir>/<name>.v`` and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.v"
    path.write_text(to_verilog(component, name))
    return path
