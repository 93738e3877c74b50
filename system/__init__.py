"""The system hardware that stands on the four T3 blocks: the GPU node (:mod:`system.node`),
the link model (:mod:`system.link`) and the ring (:mod:`system.ring`).

Layering: :mod:`hw` (shared floor) <- the blocks (``tracker``, ``mc_arbiter``, ``nmc``,
``dma``) <- :mod:`system` <- :mod:`sim` <- :mod:`t3` (the command line).  See
``docs/layout.md``.
"""
