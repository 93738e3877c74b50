"""The shared cocotb harness: agents stepped once per clock (:mod:`sim.harness.agents`) and the
runner that exports, builds (cached) and runs a design under a simulator
(:mod:`sim.harness.runner`)."""
