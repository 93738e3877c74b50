"""The port agent: one GPU's view of its node for the kernels (cocotb).

A :class:`GPUPort` drives the node's ``compute`` stream from a queue of requests, takes every
``resp`` (in order) and counts ``comm_done`` pulses (communication writes completed in the
node's DRAM: data arriving).  It is stepped by :class:`sim.harness.agents.Bench`.
"""

import collections

from hw.interfaces import Op, Packer, mem_request_layout, mem_response_layout
from sim.system.driver import REMOTE_SPACE


__all__ = ["GPUPort"]


class GPUPort:
    """One node's compute port, responses and ``comm_done``, for the kernels.

    ``send(request, done)``: queue a request; ``done(response)`` is called when its response
    arrives (local requests, in order) or when the port takes it (remote stores, which have no
    response here).  ``arrivals`` counts ``comm_done`` pulses.
    """

    def __init__(self, dut, g, params):
        pre = f"gpu{g}"
        self.valid = getattr(dut, f"{pre}_compute__valid")
        self.ready = getattr(dut, f"{pre}_compute__ready")
        self.payload = getattr(dut, f"{pre}_compute__payload")
        self.r_valid = getattr(dut, f"{pre}_resp__valid")
        self.r_ready = getattr(dut, f"{pre}_resp__ready")
        self.r_payload = getattr(dut, f"{pre}_resp__payload")
        self.comm_done = getattr(dut, f"{pre}_comm_done")
        self.req = Packer(mem_request_layout(params))
        self.resp = Packer(mem_response_layout(params))
        self.queue = collections.deque()
        self.pending = collections.deque()
        self.arrivals = 0
        self.errors = []
        self._offer = None
        self._valid_driven = 0

    def reset(self):
        self.valid.value = 0
        self.r_ready.value = 1

    def send(self, request, done=None):
        self.queue.append((request, done))

    def on_edge(self, cycle):
        if self._offer is None and self.queue:
            self._offer = self.queue.popleft()
            self.payload.value = self.req.pack(self._offer[0])
            if not self._valid_driven:
                self.valid.value = self._valid_driven = 1
        elif self._offer is None and self._valid_driven:
            self.valid.value = self._valid_driven = 0

    def on_settle(self):
        if self._offer is not None and int(self.ready.value):
            request, done = self._offer
            self._offer = None
            if request["addr"] >= REMOTE_SPACE and request["op"] != Op.READ.value:
                if done is not None:
                    done(None)
            else:
                self.pending.append(done)
        if int(self.r_valid.value):
            resp = self.resp.unpack(int(self.r_payload.value))
            if resp["error"]:
                self.errors.append(resp)
            done = self.pending.popleft()
            if done is not None:
                done(resp)
        if int(self.comm_done.value):
            self.arrivals += 1


