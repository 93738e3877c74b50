"""The GPU-side traffic engine: a GPU's compute units as synthesizable traffic
(:mod:`system.engine.rtl`), its layouts and registers (:mod:`system.engine.config`), its
programs (:mod:`system.engine.program`; a workload's are built on the host side,
:mod:`sim.system.programs`) and its golden model (:mod:`system.engine.model`)."""
