"""Test environment of the ``mc_arbiter`` block (see :mod:`sim.blocks`)."""
