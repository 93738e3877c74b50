"""Test environment of the L2 (see :mod:`sim.blocks`)."""
