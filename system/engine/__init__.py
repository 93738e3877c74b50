"""The GPU-side traffic engine: a GPU's compute units as synthesizable traffic
(:mod:`system.engine.rtl`), its program formats and registers (:mod:`system.engine.config`)
and its golden model and program builders (:mod:`system.engine.model`)."""
