"""The GPU's L2 cache between the compute units and the memory controller (``docs/l2.md``)."""
