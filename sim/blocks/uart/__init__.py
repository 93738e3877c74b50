"""Test environment of the serial bridge, :mod:`hw.uart` (see :mod:`sim.blocks`)."""
