"""Simulation environments: the shared cocotb harness (:mod:`sim.harness`), the block test
environments (:mod:`sim.blocks`) and the N-GPU system (:mod:`sim.system`)."""
