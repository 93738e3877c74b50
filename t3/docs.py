"""The register tables of ``docs/``, generated from the register definitions.

Each page of :data:`PAGES` holds its block's register map between the markers
``<!-- registers:begin -->`` and ``<!-- registers:end -->``; :func:`refresh` rewrites that part
from :meth:`hw.csr.RegisterMap.markdown` (``t3 docs``), and the test suite checks that every
page is current (``t3 docs --check``).
"""

from pathlib import Path


__all__ = ["PAGES", "BEGIN", "END", "documented", "refresh"]


BEGIN, END = "<!-- registers:begin -->\n", "\n<!-- registers:end -->"


def _node():
    from system.node import node_registers
    return node_registers()


def _engine():
    from hw.params import T3Params
    from system.engine.config import EngineParams, engine_registers
    return engine_registers(T3Params(), EngineParams(streaming=True))   # k_slices too


def _board():
    from system.board import BoardParams, board_registers
    return board_registers(BoardParams())


def _pages():
    from system.blocks import BLOCKS, default_register_map
    pages = {block.doc: (lambda block=block: default_register_map(block))
             for block in BLOCKS.values()}
    return dict(pages, **{"docs/system.md": _node, "docs/engine.md": _engine,
                          "docs/fpga.md": _board})


#: Page (relative to the repository) -> the register file it documents (default geometry):
#: every block's page (:data:`system.blocks.BLOCKS`), the node's, the engine's and the
#: board's.
PAGES = _pages()

#: The repository's root.
ROOT = Path(__file__).resolve().parent.parent


def documented(text):
    """``(before, table, after)`` of a page's text, split at the markers."""
    before, found, rest = text.partition(BEGIN)
    table, found_end, after = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"the page has no {BEGIN.strip()} ... {END.strip()} section (the "
                         f"markers on lines of their own, around at least one line)")
    return before, table, after


def refresh(root=ROOT, write=True):
    """Regenerate the register section of every page; returns the pages that were stale
    (with ``write=False`` only reports them)."""
    stale = []
    for page, registers in PAGES.items():
        path = Path(root) / page
        before, table, after = documented(path.read_text())
        want = registers().markdown()
        if table != want:
            stale.append(page)
            if write:
                path.write_text(before + BEGIN + want + END + after)
    return stale
