"""Test environment of the ``linklayer`` block (see :mod:`sim.blocks`)."""
