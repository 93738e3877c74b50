"""Golden model of the GPU-side traffic engine: :func:`gemm_requests` gives, for every
workgroup of a GEMM program, the requests the engine must issue for it, in order (reads, then
the stores of its tiles with the partials as data); :func:`run_steps` executes a step program
on a memory image and gives the requests in order.  Tests compare the engine with them request
by request, per stream (the interleaving of several WGs' bursts depends on the memory's
timing; the order within a WG does not).  The programs' format: :mod:`system.engine.program`.
"""

from hw.interfaces import ElemType, Op
from nmc.model import alu_reference
from .config import Z_CAPTURE
from .program import GemmProgram


__all__ = ["gemm_requests", "run_steps"]


def _request(**fields):
    out = {"addr": 0, "data": 0, "mask": 0, "op": 0, "stream": 0, "source": 0, "wg_id": 0,
           "wf_id": 0, "tracked": 0, "etype": 0, "tag": 0}
    out.update(fields)
    return out


def gemm_requests(params, program: GemmProgram, partials, etype):
    """``{wg_id: [request, ...]}``: each WG's reads (``a_read`` beats of its ``A`` panel from
    ``a_off``, then the rest of its ``B`` panel from ``b_off``; with a ``k_slices`` register,
    those of each slice ``j`` in turn, from ``a_off + j * a_read`` and ``b_off + j *
    (read_beats - a_read)``) and then its stores (every beat of every tile, column by column;
    data = ``partials[offset]``, the partial output's beats)."""
    reg = program.registers
    beat_bytes = params.beat_bytes
    full = (1 << beat_bytes) - 1
    slices = max(1, reg.get("k_slices", 1))
    b_read = reg["read_beats"] - reg["a_read"]
    out = {}
    for desc in program.wgs:
        reqs = []
        for j in range(slices):
            for k in range(reg["read_beats"]):
                addr = reg["a_base"] + (desc.a_off + j * reg["a_read"] + k) * beat_bytes \
                    if k < reg["a_read"] else \
                    reg["b_base"] + (desc.b_off + j * b_read + k - reg["a_read"]) * beat_bytes
                reqs.append(_request(addr=addr, op=Op.READ.value, mask=full,
                                     wg_id=desc.wg_id, etype=etype))
        op = Op.UPDATE if desc.update else Op.STORE
        for wf, start in enumerate(desc.tiles):
            for col in range(reg["tile_cols"]):
                for k in range(reg["seg_beats"]):
                    o = start + col * reg["col_beats"] + k
                    addr = reg["c_base"] + o * beat_bytes + \
                        (reg["remote_space"] if desc.remote else 0)
                    reqs.append(_request(addr=addr, data=partials[o], mask=full, op=op.value,
                                         wg_id=desc.wg_id, wf_id=wf,
                                         tracked=int(desc.tracked), etype=etype))
        out[desc.wg_id] = reqs
    return out


def run_steps(params, steps, memory, etype, remote_space):
    """Execute ``steps`` on ``memory`` (``{byte address: beat value}``; a store below
    ``remote_space`` writes it) and return ``(requests, captures)``: the requests in order and
    ``{local beat: value}`` captured."""
    beat_bytes = params.beat_bytes
    full = (1 << beat_bytes) - 1
    requests, captures = [], {}
    for step in steps:
        xs = [memory.get(step.x + i * beat_bytes, 0) for i in range(step.n)]
        requests += [_request(addr=step.x + i * beat_bytes, op=Op.READ.value, mask=full,
                              etype=etype) for i in range(step.n)]
        if step.y is not None:
            ys = [memory.get(step.y + i * beat_bytes, 0) for i in range(step.n)]
            requests += [_request(addr=step.y + i * beat_bytes, op=Op.READ.value, mask=full,
                                  etype=etype) for i in range(step.n)]
            results = [alu_reference(params, x, y, full, Op.UPDATE, ElemType(etype))[0]
                       for x, y in zip(xs, ys)]
        else:
            results = xs
        for i, value in enumerate(results):
            if step.z_kind == Z_CAPTURE:
                captures[step.z + i] = value
                continue
            addr = step.z + i * beat_bytes
            requests.append(_request(addr=addr, data=value, mask=full, op=Op.STORE.value,
                                     etype=etype))
            if addr < remote_space:
                memory[addr] = value
    return requests, captures
