"""Test environment of the GPU-side traffic engine (see :mod:`sim.blocks`)."""
