"""Test environment of the ``dma`` block (see :mod:`sim.blocks`)."""
