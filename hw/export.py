"""Verilog export of any T3 block.

Every top gets its own module name (``t3_tracker``, ``t3_nmc``, ...) so that several blocks can
be compiled into one simulation or FPGA project, and the output carries no source-path
attributes, so it is the same on every machine.  Ports are named the way Amaranth flattens a
component's signature: ``i__valid``, ``i__ready``, ``i__payload`` (the payload is one vector laid
out as the ``data.StructLayout`` says, first field in the least significant bits), plus ``clk``
and ``rst`` (synchronous, active high).
"""

import ast
import contextlib
import re
import hashlib
import importlib.util
from pathlib import Path

from amaranth.back import rtlil, verilog


__all__ = ["to_verilog", "verilog_text", "write_verilog", "hardware_modules", "source_digest"]


#: The folder holding the project's packages (``hw``, the blocks, ``system``, ...).
_ROOT = Path(__file__).resolve().parent.parent


def to_verilog(component, name):
    """Verilog text of ``component`` as a module called ``name``.

    Refuses a design whose Verilog has an ``always @*`` block that only assigns constants
    (Yosys writes one for a comb signal with constant-only parts): such a block has nothing to
    trigger it, so Icarus and Verilator never run it and the signal keeps its power-on value
    while Amaranth's simulator shows the constant."""
    if not name.isidentifier():
        raise ValueError(f"Verilog module name must be an identifier, not {name!r}")
    with _memory_init_in_one_step():
        text = verilog.convert(component, name=name, emit_src=False)
    dead = re.findall(r"^\s*always @\*\n\s*([^\s=]+) = \d+'[hdb][0-9a-fA-F_]+;$", text,
                      re.MULTILINE)
    if dead:
        raise ValueError(f"{name}: the Verilog of {', '.join(sorted(set(dead)))} is a "
                         f"constant-only always @* block that no simulator runs; drive the "
                         f"constant from a register or a whole signal instead")
    return text


def _emit_memory(self, cell_idx, cell):
    """Amaranth 0.5's ``ModuleEmitter.emit_memory`` with the initial contents' constant
    written in one step.  Amaranth makes a net object of every bit of a memory's contents and
    joins them one by one: half of a ring's export (its GPUs' banks hold 128 KiB and more),
    about 10 s a ring.  The constant is the same text: the rows' bits, the last row's most
    significant first (``tests/test_foundation.py`` compares the two)."""
    if not cell.init or not cell.width:
        return _AMARANTH_EMIT_MEMORY(self, cell_idx, cell)
    mask = (1 << cell.width) - 1
    bits = "".join(format(row & mask, f"0{cell.width}b") for row in reversed(cell.init))
    self.builder.cell("$meminit_v2", ports={
        "ADDR": self.sigspec(),
        "DATA": f"{len(bits)}'{bits}",
        "EN": self.sigspec(rtlil._nir.Value.ones(cell.width)),
    }, parameters={
        "MEMID": self.memories[cell_idx].memid,
        "ABITS": 0,
        "WIDTH": cell.width,
        "WORDS": cell.depth,
        "PRIORITY": 0,
    }, src_loc=cell.src_loc)


_AMARANTH_EMIT_MEMORY = rtlil.ModuleEmitter.emit_memory


@contextlib.contextmanager
def _memory_init_in_one_step(fast=True):
    """While it lasts, Amaranth's RTLIL backend writes a memory's contents with
    :func:`_emit_memory` (``fast=False``: with Amaranth's own)."""
    rtlil.ModuleEmitter.emit_memory = _emit_memory if fast else _AMARANTH_EMIT_MEMORY
    try:
        yield
    finally:
        rtlil.ModuleEmitter.emit_memory = _AMARANTH_EMIT_MEMORY


def verilog_text(component, name):
    """The whole Verilog of ``component`` as module ``name``, as :func:`write_verilog` writes
    it: a component that instantiates modules of its own (``Instance``) lists them in
    ``instanced_modules``, ``{module name: component}``; their Verilog follows the top's (each
    exported once, however often it is instantiated)."""
    text = to_verilog(component, name)
    for sub_name, sub in getattr(component, "instanced_modules", {}).items():
        text += "\n" + to_verilog(sub, sub_name)
    return text


def write_verilog(component, name, out_dir):
    """Write ``<out_dir>/<name>.v`` (:func:`verilog_text`) and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.v"
    path.write_text(verilog_text(component, name))
    return path


#: ``{(path, package): (the file's size and time, its imports)}``: a file is parsed again only
#: when it changed (a record's key walks the same imports once per run).
_IMPORTS = {}


def _imports(path, package):
    """Names of the modules a source file imports (absolute and relative, nested included)."""
    stat = path.stat()
    seen = _IMPORTS.get((path, package))
    if seen is None or seen[0] != (stat.st_size, stat.st_mtime_ns):
        seen = _IMPORTS[path, package] = ((stat.st_size, stat.st_mtime_ns),
                                          list(_parse_imports(path, package)))
    return seen[1]


def _statements(body):
    """Every statement of ``body`` and of the blocks nested in it (functions, classes, ``if``,
    ``try``, ``with``, loops, ``match``): where an import can stand.  Expressions, nine in ten
    of a module's nodes, are not visited."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo.extend(getattr(node, field, ()))


def _parse_imports(path, package):
    for node in _statements(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            yield base
            for alias in node.names:            # ``from pkg import module``
                yield f"{base}.{alias.name}"


def _project_file(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    path = Path(spec.origin).resolve()
    return path if _ROOT in path.parents else None


def hardware_modules(top_module):
    """The project's modules a design is built from: ``top_module`` (e.g. ``"system.ring"``)
    and every project module it imports, directly or through others, sorted by name.  Golden
    models, testbenches and the command line are not among them unless the hardware imports
    them."""
    seen, todo = {}, [top_module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _project_file(name)
        if path is None:
            continue
        seen[name] = path
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo.extend(_imports(path, package))
    return dict(sorted(seen.items()))


def source_digest(top_module):
    """SHA-256 over the names and sources of :func:`hardware_modules` of ``top_module``: it
    changes exactly when the source of the hardware changes."""
    h = hashlib.sha256()
    for name, path in hardware_modules(top_module).items():
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
