"""The N-GPU system above the hardware: T3's driver API (:mod:`sim.system.driver`), the
workload generator (:mod:`sim.system.workload`), the configurations and their set-up
(:mod:`sim.system.configure`), the engines' programs (:mod:`sim.system.programs`), the host's
phase script (:mod:`sim.system.host`) on the simulated ring (:mod:`sim.system.testbench`, cocotb)
or the board (:mod:`sim.board.host`), the results (:mod:`sim.system.results`) and the runs
behind ``t3 run`` and ``t3 compare`` (:mod:`sim.system.run`, :mod:`sim.system.compare`)."""
