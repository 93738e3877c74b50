"""The N-GPU system above the hardware: T3's driver API (:mod:`sim.system.driver`), the
workload generator (:mod:`sim.system.workload`), the configurations and their set-up
(:mod:`sim.system.configure`), the cocotb testbench (:mod:`sim.system.port`,
:mod:`sim.system.kernels`, :mod:`sim.system.testbench`, :mod:`sim.system.results`) and the
runs behind ``t3 run`` and ``t3 compare`` (:mod:`sim.system.run`, :mod:`sim.system.compare`)."""
