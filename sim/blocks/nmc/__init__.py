"""Test environment of the ``nmc`` block (see :mod:`sim.blocks`)."""
