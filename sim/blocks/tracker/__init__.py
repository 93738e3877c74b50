"""Test environment of the ``tracker`` block (see :mod:`sim.blocks`)."""
