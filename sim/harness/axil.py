"""An AXI4-Lite master for many configuration ports on one clock, in batches.

:class:`AxiLiteBatch` drives every port's accesses of a batch from one coroutine: while a batch
runs it costs two simulator callbacks a cycle, whatever the number of ports (the ring host's
four to 32 GPUs), and none between batches.  cocotbext-axi's ``AxiLiteMaster`` runs five
coroutines a port (a channel each and the master's own), each resumed every cycle a channel is
busy: on the 4-GPU ring that was 110-230 microseconds of Python per cycle of a counter read or
register write, against 45 for a cycle of the bulk port's loop (measured, ``docs/system.md``).

Timing, the same on Icarus and Verilator (as :class:`sim.harness.agents.Bench`): a batch
begins at a falling edge, where it drives the first request of every port; then, each cycle,
it samples the slaves' answers at ``ReadOnly`` (settled values, what the next rising edge
takes), and right after that rising edge counts the handshakes it completed and drives the
next requests.  Batches run one at a time: one begun while another runs waits for it.  A port's requests are issued in order, the next as soon as the one before is
taken (AXI4-Lite allows that; the answers come back in order), ``bready`` and ``rready`` stay
high, and every answer's ``resp`` is checked.

Ports are named as Amaranth exports :func:`hw.axil.axil_signature`: ``<prefix>__awaddr``, ...
"""

from cocotb.triggers import FallingEdge, Lock, ReadOnly, RisingEdge


__all__ = ["AxiLiteBatch", "AxiLiteError"]


class AxiLiteError(AssertionError):
    """A slave answered an access with an error response, or not at all."""


class _Port:
    def __init__(self, dut, prefix):
        self.prefix = prefix

        def sig(name):
            return getattr(dut, f"{prefix}__{name}")
        (self.awaddr, self.awvalid, self.awready, self.wdata, self.wvalid, self.wready,
         self.bresp, self.bvalid, self.bready, self.araddr, self.arvalid, self.arready,
         self.rdata, self.rresp, self.rvalid, self.rready) = map(sig, (
            "awaddr", "awvalid", "awready", "wdata", "wvalid", "wready", "bresp", "bvalid",
            "bready", "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready"))
        for name, value in (("awvalid", 0), ("wvalid", 0), ("arvalid", 0), ("bready", 1),
                            ("rready", 1), ("awprot", 0), ("arprot", 0), ("wstrb", 0xF)):
            sig(name).value = value


class _Run:
    """One port's part of a batch: its requests, the next to offer on the address and data
    channels, the answers received, the words read, cycles without progress."""

    def __init__(self, port, ops):
        self.port, self.ops = port, ops
        self.a = self.w = self.answered = self.idle = 0
        self.offered_a = self.offered_w = None
        self.words = []


class AxiLiteBatch:
    """The AXI4-Lite masters of ``prefixes`` (one port each) on clock ``clk`` of ``dut``.

    ``limit``: cycles a batch may go without a handshake or an answer on a port that still
    has work before it raises :class:`AxiLiteError` (a slave that hangs)."""

    def __init__(self, dut, prefixes, clk, limit=1000):
        self.ports = [_Port(dut, prefix) for prefix in prefixes]
        self.clk = clk
        self.limit = limit
        self.lock = Lock()

    async def write(self, batches):
        """``batches[p]``: ``[(byte address, word)]`` for port ``p``, written in that order;
        returns once every write is answered."""
        await self._run(batches, write=True)

    async def read(self, batches):
        """``batches[p]``: byte addresses to read on port ``p``; returns the words, a list per
        port, in order."""
        return await self._run([[(addr, None) for addr in addrs] for addrs in batches],
                               write=False)

    async def _run(self, batches, write):
        if len(batches) != len(self.ports):
            raise ValueError(f"{len(batches)} batches for {len(self.ports)} ports")
        async with self.lock:           # a batch begun meanwhile (a sampler's) waits its turn
            return await self._step(batches, write)

    async def _step(self, batches, write):
        runs = [_Run(port, ops) for port, ops in zip(self.ports, batches)]
        active = [run for run in runs if run.ops]
        await FallingEdge(self.clk)
        for run in active:
            self._drive(run, write)
        while active:
            await ReadOnly()
            samples = [self._sample(run.port, write) for run in active]
            await RisingEdge(self.clk)
            still = []
            for run, (a_ready, w_ready, valid, resp, data) in zip(active, samples):
                n, progress = len(run.ops), False
                if run.a < n and a_ready:
                    run.a, progress = run.a + 1, True
                if write and run.w < n and w_ready:
                    run.w, progress = run.w + 1, True
                if valid:
                    if resp != 0:
                        kind = "write" if write else "read"
                        raise AxiLiteError(f"{run.port.prefix}: {kind} of "
                                           f"0x{run.ops[run.answered][0]:x} answered resp {resp}")
                    if not write:
                        run.words.append(data)
                    run.answered, progress = run.answered + 1, True
                if run.answered == n:
                    continue                # its valids dropped with its last request
                run.idle = 0 if progress else run.idle + 1
                if run.idle > self.limit:
                    taken = f"{run.a} taken" if not write else \
                        f"{run.a} addresses and {run.w} data taken"
                    raise AxiLiteError(f"{run.port.prefix}: no handshake or answer for "
                                       f"{self.limit} cycles ({taken}, {run.answered} of {n} "
                                       f"accesses answered)")
                self._drive(run, write)
                still.append(run)
            active = still
        return [run.words for run in runs]

    @staticmethod
    def _drive(run, write):
        """Offer ``run``'s next requests (signals are written only when they change)."""
        port, ops, n = run.port, run.ops, len(run.ops)
        if run.a != run.offered_a:
            run.offered_a = run.a
            valid, addr = (port.awvalid, port.awaddr) if write else (port.arvalid, port.araddr)
            valid.value = int(run.a < n)
            if run.a < n:
                addr.value = ops[run.a][0]
        if write and run.w != run.offered_w:
            run.offered_w = run.w
            port.wvalid.value = int(run.w < n)
            if run.w < n:
                port.wdata.value = ops[run.w][1]

    @staticmethod
    def _sample(port, write):
        if write:
            valid = int(port.bvalid.value)
            return (int(port.awready.value), int(port.wready.value), valid,
                    int(port.bresp.value) if valid else 0, None)
        valid = int(port.rvalid.value)
        return (int(port.arready.value), 0, valid, int(port.rresp.value) if valid else 0,
                int(port.rdata.value) if valid else None)
