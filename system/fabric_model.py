"""Golden model of :mod:`system.fabric`: what a :class:`system.fabric.Router` does to a
stream of beats, and what a :class:`system.fabric.Merge`'s output must be for its inputs.

A beat is ``(tdata, tkeep, tlast, tuser)``; a packet a list of beats, its first the header
(``tuser``), its last the one with ``tlast``.
"""

__all__ = ["route", "check_merge", "packets_of", "mesh"]


def route(beats, routes, gpu_bits):
    """The router's outputs for input ``beats`` (in order): ``(outputs, unroutable, stray)``,
    ``outputs[k]`` the beats that leave on output ``k``, in order."""
    n = len({r for r in routes if r is not None})
    outputs = [[] for _ in range(n)]
    unroutable = stray = 0
    held = None                     # the output of the packet in progress; n: dropped
    for beat in beats:
        tdata, _, tlast, tuser = beat
        if held is None:
            if not tuser:
                stray += 1
                continue
            dst = tdata & ((1 << gpu_bits) - 1)
            held = routes[dst] if dst < len(routes) and routes[dst] is not None else n
            unroutable += held == n
        if held < n:
            outputs[held].append(beat)
        if tlast:
            held = None
    return outputs, unroutable, stray


def packets_of(beats):
    """``beats`` cut into packets at each ``tlast`` (the last one may be unfinished)."""
    packets, current = [], []
    for beat in beats:
        current.append(beat)
        if beat[2]:
            packets.append(current)
            current = []
    if current:
        packets.append(current)
    return packets


def check_merge(inputs, output):
    """Raise ``AssertionError`` unless ``output`` (beats) is every packet of every input
    (``inputs[k]``: input ``k``'s packets, in order) once, whole, each input's in its order.
    Returns the input each output packet came from."""
    pending = [list(packets) for packets in inputs]
    order = []
    for n, packet in enumerate(packets_of(output)):
        src = [k for k, p in enumerate(pending) if p and p[0] == packet]
        assert src, f"output packet {n} ({len(packet)} beats) is no input's next packet"
        pending[src[0]].pop(0)
        order.append(src[0])
    left = {k: len(p) for k, p in enumerate(pending) if p}
    assert not left, f"packets never left the merge (input: count): {left}"
    return order


def mesh(streams, gpus, gpu_bits, routes_of):
    """What a full mesh must deliver for the senders' ``streams`` (beats of GPU ``g``):
    ``(inputs, unroutable, stray)``, ``inputs[d]`` the packets for GPU ``d`` from each other
    GPU, in the merge's input order (``routes_of(gpus, g)``: GPU ``g``'s routes; at GPU ``d``
    the link from ``g`` is input ``(g - d - 1) mod gpus``)."""
    inputs = [[None] * (gpus - 1) for _ in range(gpus)]
    unroutable = stray = 0
    for g, beats in enumerate(streams):
        routes = routes_of(gpus, g)
        outputs, u, s = route(beats, routes, gpu_bits)
        unroutable, stray = unroutable + u, stray + s
        for d, out in enumerate(routes):
            if out is not None:
                inputs[d][(g - d - 1) % gpus] = packets_of(outputs[out])
    return inputs, unroutable, stray
