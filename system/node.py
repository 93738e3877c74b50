"""One GPU node of the tensor-parallel group: the four T3 blocks wired around the memory
controller (``docs/design.md`` section 2; paper Figure 8).

```
compute ─► decoder ─┬─► L2 ─► MC arbiter (compute) ─► MCQ ─► NMC/HBM ─► router ─┬─► L2 ─► resp
 (CUs)              │             ▲ (comm)         │ tap                        ├─► DMA (tile reads)
                    │             │                ▼                            └─► comm_done
                    └─► DMA remote│              Tracker ─► DMA trig
                         DMA mem ─┘
             rx ─► DMA ─► tx           cfg (AXI4-Lite) ─► every block's registers
```

The L2 (``NodeParams.l2``, ``docs/l2.md``) is optional: without it the CUs' local requests
enter the arbiter as they are, and their responses return from the router.
"""

import dataclasses

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect

from dma.config import DMAParams
from dma.rtl import DMAEngine
from l2.config import L2Params
from l2.rtl import L2Cache
from mc_arbiter.config import ArbiterParams
from mc_arbiter.rtl import MCArbiter
from nmc.config import NMCParams
from tracker.config import TrackerParams
from tracker.rtl import Tracker
from hw.axil import AXILiteToCSR, CSRDecoder, axil_signature
from hw.csr import Field, Reg, RegisterFile, RegisterMap, count, csr_signature
from hw.interfaces import Op, Stream, link_signature, request_signature, response_signature
from hw.params import T3Params, check_params, param
from hw.pipeline import SkidBuffer, WriteAheadFIFO
from linklayer.config import LinkLayerParams, ack_signature
from linklayer.rtl import LinkLayer
from system.blocks import BLOCKS


__all__ = ["NodeParams", "FRFCFS_IN_FLIGHT", "GPUNode", "node_registers", "block_registers", "BLOCK_ORDER",
           "WINDOW_BITS", "CFG_ADDR_BITS", "register_address"]


#: Blocks of the configuration space, in address order; block ``k`` starts at byte
#: ``k << (WINDOW_BITS + 2)``.  ``l2`` and ``link`` read as zero in a node without an L2 or a
#: link layer.  ``gpu`` is the GPU side's window, outside the node (the traffic engine of a
#: simulation top, :mod:`system.gpu`): the node's ``ext`` port.
BLOCK_ORDER = ("node", "tracker", "arbiter", "nmc", "dma", "l2", "gpu", "link")

#: Word-address bits of each block's window (256 registers).
WINDOW_BITS = 8

#: Byte-address bits of a node's ``cfg`` port: a window of :data:`WINDOW_BITS` word-address
#: bits per block of :data:`BLOCK_ORDER`, byte addresses.
CFG_ADDR_BITS = WINDOW_BITS + max(1, (len(BLOCK_ORDER) - 1).bit_length()) + 2


#: The responses an FR-FCFS NMC unit's queue holds beside the MCQ's requests: the in-order
#: unit's response queue (:class:`nmc.config.NMCParams`' ``resp_depth`` default).
FRFCFS_IN_FLIGHT = 16


@dataclasses.dataclass(frozen=True)
class NodeParams:
    """The geometry of every block of a node (the DMA's ``commands`` must equal the Tracker's
    ``regions``: a trigger's region selects the command)."""
    tracker: TrackerParams = TrackerParams(sets=64, ways=8, regions=4)
    #: an MCQ of 64 entries: the paper's thresholds (5, 10, 30, no limit) need one deeper than
    #: 30, and a GPU's is (Accel-Sim's QV100 model: an FR-FCFS queue of 64 per channel)
    arbiter: ArbiterParams = ArbiterParams(depth=64)
    nmc: NMCParams = NMCParams()
    #: the trigger queue holds every trigger of a kernel (512 tiles tracked per GPU): a full
    #: queue stalls the Tracker, whose stall stops the DMA's own tile reads (docs/dma.md)
    dma: DMAParams = DMAParams(trigger_depth=512)
    #: posted remote stores buffered between the CUs and the link (beats): a GPU's fabric
    #: takes a CU's remote stores without holding up its other accesses while the link drains
    remote_buffer: int = param(256, "posted remote stores buffered, beats", 2, 4096)
    #: the GPU's L2 between the CUs' local accesses and the memory controller (``docs/l2.md``),
    #: or ``None``: none, the CUs' requests reach the arbiter as they are
    l2: L2Params = None
    #: the link layer between the DMA engine and the links (``docs/linklayer.md``: CRC,
    #: sequence numbers, replay), or ``None``: the DMA's packets go to the link as they are
    linklayer: LinkLayerParams = None

    def __post_init__(self):
        check_params(self)
        if self.l2 is not None and not isinstance(self.l2, L2Params):
            raise ValueError(f"l2 must be an L2Params or None, not {self.l2!r}")
        if self.linklayer is not None:
            if not isinstance(self.linklayer, LinkLayerParams):
                raise ValueError(f"linklayer must be a LinkLayerParams or None, not "
                                 f"{self.linklayer!r}")
            # a remote-store packet: its header and up to remote_burst beats
            if self.dma.remote_burst + 1 > self.linklayer.max_packet_beats:
                raise ValueError(f"linklayer.max_packet_beats {self.linklayer.max_packet_beats} "
                                 f"must hold a remote-store packet: dma.remote_burst "
                                 f"{self.dma.remote_burst} beats and its header")
        # every command between the arbiter's tap and the NMC unit's column command: the MCQ's
        # entries and the NMC unit's input slice (two)
        if self.nmc.scheduler == "bank-parallel" and \
                self.nmc.ahead_depth < self.arbiter.depth + 2:
            raise ValueError(f"nmc.ahead_depth {self.nmc.ahead_depth} must hold every command "
                             f"on its way to the NMC unit: arbiter.depth "
                             f"{self.arbiter.depth} + 2")
        # an FR-FCFS unit's queue holds every request the arbiter counts, with room for the
        # responses of an in-order unit's queue beside them (16)
        if self.nmc.scheduler == "fr-fcfs" and \
                self.nmc.resp_depth < self.arbiter.depth + FRFCFS_IN_FLIGHT:
            raise ValueError(f"nmc.resp_depth {self.nmc.resp_depth} must hold the MCQ's "
                             f"requests and the responses in flight: arbiter.depth "
                             f"{self.arbiter.depth} + {FRFCFS_IN_FLIGHT}")
        if self.dma.commands != self.tracker.regions:
            raise ValueError(f"dma.commands {self.dma.commands} must equal tracker.regions "
                             f"{self.tracker.regions}")

    def memory_bytes(self, params: T3Params):
        """Bytes of the node's memory (the NMC unit's capacity)."""
        return self.nmc.capacity_beats * params.beat_bytes

    def to_dict(self):
        out = {}
        for block in BLOCKS.values():
            value = getattr(self, block.node_field)
            out[block.node_field] = None if value is None else _as_dict(value)
        return dict(out, remote_buffer=self.remote_buffer)

    @classmethod
    def from_dict(cls, d):
        blocks = {}
        for block in BLOCKS.values():
            value = d.get(block.node_field)
            if value is not None:
                make = getattr(block.params, "from_dict", None)
                blocks[block.node_field] = make(value) if make else block.params(**value)
            elif block.optional:
                blocks[block.node_field] = None
        return cls(**blocks, remote_buffer=d.get("remote_buffer", 256))


def _as_dict(params):
    """A block's parameters as JSON: their ``to_dict``, else their fields."""
    return params.to_dict() if hasattr(params, "to_dict") else dataclasses.asdict(params)


def node_registers():
    """The node's own registers (block ``node``)."""
    return RegisterMap([
        Reg("info", 32, "ro", "the configuration space", fields=(
            Field("blocks", 8, "blocks in the configuration space"),
            Field("window_bits", 8, "word-address bits of each block's window"))),
        Reg("ctrl", None, "wo", "write 1 to strobe the MC arbiter", fields=(
            Field("drain", doc="the producer kernel ended: drain the communication stream"),
            Field("calib_start", doc="the calibration window starts"),
            Field("calib_end", doc="the calibration window ends"))),
        Reg("cycles", 32, "ro", "cycles since reset"),
        Reg("comm_writes", 32, "ro", "communication-stream writes completed in DRAM "
                                     "(received remote and DMA stores and updates)"),
        Reg("compute_resps", 32, "ro", "responses returned on `resp`"),
        Reg("remote_out", 32, "ro", "compute stores sent to the remote window"),
    ])


def block_registers(params: T3Params, nparams: NodeParams):
    """``{block name: RegisterMap}`` of a node, without building the hardware (the driver
    and the agents use it to address registers): the node's own and, in the order of their
    windows, every block's it has (:data:`system.blocks.BLOCKS`)."""
    blocks = {"node": node_registers()}
    for block in BLOCKS.values():
        bparams = getattr(nparams, block.node_field)
        if bparams is not None:
            blocks[block.window] = block.registers(params, bparams)
    return blocks


def register_address(block, word):
    """Byte address on ``cfg`` of word ``word`` of block ``block``."""
    return (BLOCK_ORDER.index(block) << (WINDOW_BITS + 2)) | (word << 2)


class GPUNode(wiring.Component):
    """One GPU's T3 hardware.

    Ports
    -----
    compute : In(stream.Signature(memory request))
        The CUs' requests: the GEMM's input ``READ``\\ s and its output stores (``STORE``, or
        ``UPDATE`` with ``tracked`` for T3's ``update`` flag), with ``wg_id``/``wf_id``.
        Stores and updates inside the DMA's remote window (``remote_map``) go to the link as
        remote updates, through a ``remote_buffer``-beat egress queue (posted writes: a
        slow link does not hold up the CUs' local accesses until the queue is full);
        everything else enters the MC arbiter's compute stream, through the L2 when the node
        has one (``NodeParams.l2``: it caches what its windows say and passes the rest,
        every UPDATE included, unchanged; :class:`l2.rtl.L2Cache`, behind a register slice
        towards the arbiter).  ``compute.ready`` is a
        register; a request enters the arbiter (or the egress queue) 1 cycle after its
        handshake.  Every stream between two blocks passes a :class:`hw.pipeline.SkidBuffer`
        (the compute port before the decoder, egress queue → DMA, DMA → arbiter, arbiter
        ``tap`` → Tracker, MCQ → NMC unit, NMC unit → the response router): one beat a cycle,
        every path between blocks registered; a read's response returns 3 cycles later than
        the arbiter and the NMC unit alone give it (the compute port's, the MCQ → NMC and
        the NMC → router slices).
    resp : Out(stream.Signature(memory response))
        One response per local compute request, in order (``data`` for reads): the L2's
        ``o`` when the node has one.
    comm_done : Out(1)
        Pulses once for every communication-stream write completed in DRAM (an arriving remote
        or DMA update or store): the agents' view of data arriving.
    tx, rx : link (AXI4-Stream)
        To GPU ``g - 1`` and from GPU ``g + 1`` of the ring: the DMA engine's own, or with a
        link layer (``NodeParams.linklayer``) its sender's and receiver's
        (:class:`linklayer.rtl.LinkLayer`: packets with trailers; each good packet reaches
        the DMA once, in order).
    ack_i, ack_o : acknowledgements (with a link layer only)
        ``ack_i`` from GPU ``g - 1``'s receiver (of this node's packets), ``ack_o`` this
        node's receiver's, to GPU ``g + 1``.
    cfg : In(axil_signature(...))
        AXI4-Lite configuration: block ``k`` of :data:`BLOCK_ORDER` at byte ``k * 1024``; the
        map is in ``docs/system.md`` (:func:`system.node.register_address`).
        Every block's register bus starts from registers of its own (a registered
        :class:`hw.axil.CSRDecoder`): a write acts 2 cycles after its ``AW``/``W`` handshake,
        and a read is answered 4 cycles after its ``AR`` (the DMA's registers take two
        cycles to read, :attr:`hw.csr.RegisterMap.read_latency`; every block's answer waits
        for the longest).
    ext : Out(csr_signature(ext_addr_bits))
        The register bus of the ``gpu`` window (its first ``2 ** ext_addr_bits`` words), for
        the GPU side; reads as zero when nothing is connected.  Registered like the blocks'
        (its ``r_data`` answers the ``addr`` of the previous cycle).
    arb_drain, arb_calib_start, arb_calib_end : In(1)
        Kernel-boundary strobes from the GPU side, OR-ed with the ``ctrl`` register's: the
        producer kernel ended; the calibration window starts; it ends.  Registered: the
        arbiter sees a strobe in the next cycle.
    l2_flush : In(1)
        A strobe: the L2 writes back every dirty line and invalidates every line once every
        request in flight is answered (the kernel's end, :class:`l2.rtl.L2Cache` ``flush``).
    l2_flushed : Out(1)
        A strobe when that flush has ended (every write-back answered by memory); without an
        L2, the cycle after ``l2_flush``.
    """

    def __init__(self, params: T3Params, nparams: NodeParams = NodeParams(),
                 ext_addr_bits=WINDOW_BITS):
        self.params, self.nparams = params, nparams
        self.tracker = Tracker(params, nparams.tracker)
        frfcfs = nparams.nmc.scheduler == "fr-fcfs"
        # an FR-FCFS unit holds the MCQ's requests until their column commands: the arbiter's
        # level counts them until then (``retire``)
        self.arbiter = MCArbiter(params, nparams.arbiter, retire=frfcfs)
        self.nmc = BLOCKS["nmc"].build(params, nparams.nmc)     # FR-FCFS or the NMCUnit
        self.dma = DMAEngine(params, nparams.dma)
        self.l2 = L2Cache(params, nparams.l2) if nparams.l2 is not None else None
        self.link = LinkLayer(params, nparams.linklayer) if nparams.linklayer is not None \
            else None
        self.regs = node_registers()
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        self.block_regs = {"node": self.regs, "tracker": self.tracker.regs,
                           "arbiter": self.arbiter.regs, "nmc": self.nmc.regs,
                           "dma": self.dma.regs}
        if self.l2 is not None:
            self.block_regs["l2"] = self.l2.regs
        if self.link is not None:
            self.block_regs["link"] = self.link.regs
        # registered: each block's register bus starts from registers by the block (the bus
        # spans the node; the write decode behind its wires was the node's slowest path)
        self.decoder = CSRDecoder(WINDOW_BITS, [
            (name, self.block_regs[name].addr_bits, self.block_regs[name].read_latency)
            if name in self.block_regs else (name, ext_addr_bits if name == "gpu" else 1)
            for name in BLOCK_ORDER], registered=True)
        self.cfg_addr_bits = self.decoder.addr_bits + 2
        assert self.cfg_addr_bits == CFG_ADDR_BITS
        super().__init__({
            "compute":   In(request_signature(params)),
            "resp":      Out(response_signature(params)),
            "comm_done": Out(1),
            "tx":        Out(link_signature(params)),
            "rx":        In(link_signature(params)),
            "cfg":       In(axil_signature(self.cfg_addr_bits)),
            "ext":       Out(csr_signature(ext_addr_bits)),
            "arb_drain": In(1),
            "arb_calib_start": In(1),
            "arb_calib_end": In(1),
            "l2_flush": In(1),
            "l2_flushed": Out(1),
            **({"ack_i": In(ack_signature(nparams.linklayer)),
                "ack_o": Out(ack_signature(nparams.linklayer))}
               if nparams.linklayer is not None else {}),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.tracker = tracker = self.tracker
        m.submodules.arbiter = arbiter = self.arbiter
        m.submodules.nmc = nmc = self.nmc
        m.submodules.dma = dma = self.dma
        m.submodules.decoder = decoder = self.decoder
        m.submodules.axil = axil = AXILiteToCSR(self.cfg_addr_bits, decoder.read_latency)

        # --- configuration -------------------------------------------------------------------
        connect(m, wiring.flipped(self.cfg), axil.axil)
        connect(m, axil.csr, decoder.bus)
        connect(m, decoder.gpu, wiring.flipped(self.ext))
        for name, block in (("tracker", tracker), ("arbiter", arbiter), ("nmc", nmc),
                            ("dma", dma)):
            connect(m, getattr(decoder, name), block.csr)
        regs = self.regfile
        cnt = {k: Signal(32, name=f"node_{k}") for k in ("cycles", "comm_writes",
                                                         "compute_resps", "remote_out")}
        node_csr = wiring.flipped(decoder.node)
        regs.elaborate(m, node_csr, {"info": {"blocks": len(BLOCK_ORDER),
                                              "window_bits": WINDOW_BITS}, **cnt})
        # registered: a register write's decode and the arbiter's policy into its enqueue were
        # one path (the node placed at 43.6 MHz); a strobe acts in the next cycle
        m.d.sync += [
            arbiter.drain.eq(regs.command("ctrl", "drain") | self.arb_drain),
            arbiter.calib_start.eq(regs.command("ctrl", "calib_start") | self.arb_calib_start),
            arbiter.calib_end.eq(regs.command("ctrl", "calib_end") | self.arb_calib_end)]
        count(m, cnt["cycles"], 1, 0)

        # --- compute port: remote window or the local memory controller ----------------------
        # Every stream between two blocks passes a register slice (hw.pipeline.SkidBuffer):
        # the blocks sit far apart on an FPGA and the wires alone take most of a cycle
        # (docs/fpga.md).  The compute port's window check is registered with the request.
        req = self.compute.payload
        in_window = []
        for k, window in enumerate(dma.window):     # the DMA's remote_map windows
            offset = Signal(len(window.base) + 1, name=f"window{k}_offset")
            m.d.comb += offset.eq(req.addr - window.base)
            in_window.append(~offset[-1] & (offset < window.size))
        layout = self.compute.payload.shape()
        # the window check's bit from the head's register (chosen from the ring by the read
        # pointer, it began the arbiter's decision on the compute stream's valid: the read
        # pointer into the policy's flags, 11.2 ns in a node)
        m.submodules.compute_in = compute_in = SkidBuffer(
            data.StructLayout({"req": layout, "remote": 1}), registered_out=("remote",))
        m.d.comb += [
            compute_in.i.valid.eq(self.compute.valid),
            compute_in.i.payload.req.eq(req),
            compute_in.i.payload.remote.eq((req.op != Op.READ) & Cat(*in_window).any()),
            self.compute.ready.eq(compute_in.i.ready),
        ]
        head, to_remote = compute_in.o.payload.req, compute_in.o.payload.remote
        # the egress queue: block RAM (a beat of 330 bits, 256 deep), read a cycle ahead into a
        # register beside it (its read register's 5.8 ns and the wires to the DMA's remote
        # slice, far from the RAM, were the node's critical path, 11.7 ns); the timing of
        # Amaranth's SyncFIFOBuffered (hw.pipeline.WriteAheadFIFO's read_ahead)
        m.submodules.egress = egress = WriteAheadFIFO(width=layout.size,
                                                      depth=self.nparams.remote_buffer,
                                                      read_ahead=True)
        # the local path: through the L2 when the node has one, else straight to the arbiter
        l2 = self.l2
        local = l2.i if l2 is not None else arbiter.compute
        m.d.comb += [
            egress.w_data.eq(head.as_value()),
            local.payload.eq(head),
            egress.w_en.eq(compute_in.o.valid & to_remote),
            local.valid.eq(compute_in.o.valid & ~to_remote),
            compute_in.o.ready.eq(Mux(to_remote, egress.w_rdy, local.ready)),
        ]
        if l2 is not None:
            m.submodules.l2 = l2
            connect(m, decoder.l2, l2.csr)
            # the L2's memory queue and the arbiter's enqueue policy: a register slice between
            m.submodules.l2_out = l2_out = SkidBuffer(layout)
            connect(m, l2.mem, l2_out.i)
            connect(m, l2_out.o, arbiter.compute)
            m.d.comb += [l2.flush.eq(self.l2_flush), self.l2_flushed.eq(l2.flushed)]
        else:                                   # nothing to write back: done at once
            m.d.sync += self.l2_flushed.eq(self.l2_flush)
        count(m, cnt["remote_out"], compute_in.o.valid & to_remote & egress.w_rdy, 0)
        # the egress queue's read register straight into the DMA's remote port: the port is
        # the combiner's register slice (its head's fields and its verdicts on the head made
        # a cycle ahead, dma.combiner; the egress queue's block-RAM output and the DMA's
        # write-combining check into its run queue were one path, the node placed at 45 MHz)
        m.d.comb += [dma.remote.valid.eq(egress.r_rdy), dma.remote.payload.eq(egress.r_data),
                     egress.r_en.eq(dma.remote.ready)]

        # --- memory controller, Tracker, DMA --------------------------------------------------
        # the DMA's request choice and the arbiter's policy, and the arbiter's enqueue and the
        # Tracker's region lookup, were one path each (the node placed at 43.5 MHz)
        m.submodules.comm_in = comm_in = SkidBuffer(layout)
        # the Tracker and the NMC unit decode the head at once (an address into the regions'
        # compares, into a bank's state) and take it by a ready from their own registers: the
        # fields they decode come from the head's register, not a multiplexer after the read
        # pointer (the pointer's net and the multiplexer began the node's worst paths, 2.5-3 ns
        # of them); the data stays in the ring (the NMC's ready into the enables of all 330
        # bits of its command placed at 63.5 MHz).  The Tracker counts the enabled bytes of
        # ``mask`` at once, too (through the ring's select, the count into stage 1's increment
        # was the node's critical path, 11.8 ns)
        m.submodules.tracker_in = tracker_in = SkidBuffer(
            layout, registered_out=("addr", "op", "tracked", "etype", "mask"))
        connect(m, dma.mem, comm_in.i)
        connect(m, comm_in.o, arbiter.comm)
        if self.nparams.nmc.scheduler == "bank-parallel":
            # the tap feeds the Tracker and announces each request to the NMC unit's row
            # scheduler: a request enqueues when both take it (the arbiter offers one only
            # with ``tap.ready``)
            m.d.comb += [
                tracker_in.i.valid.eq(arbiter.tap.valid),
                tracker_in.i.payload.eq(arbiter.tap.payload),
                nmc.ahead.valid.eq(arbiter.tap.valid),
                nmc.ahead.payload.eq(arbiter.tap.payload.addr),
                arbiter.tap.ready.eq(tracker_in.i.ready & nmc.ahead.ready),
            ]
        else:
            connect(m, arbiter.tap, tracker_in.i)
        if self.nparams.nmc.scheduler == "fr-fcfs":
            m.d.comb += [arbiter.retired.eq(nmc.retired),
                         arbiter.retired_comm.eq(nmc.retired_comm)]
        connect(m, tracker_in.o, tracker.i)
        # the DMA's trigger-queue level (its ready) and the Tracker's output state were one
        # path (64.4 MHz)
        m.submodules.trig_in = trig_in = SkidBuffer(tracker.o.payload.shape())
        connect(m, tracker.o, trig_in.i)
        connect(m, trig_in.o, dma.trig)
        # the MCQ's LUT-RAM read and the NMC unit's command checks were one path (54.5 MHz)
        m.submodules.cmd_in = cmd_in = SkidBuffer(layout, registered_out=("addr", "op"))
        connect(m, arbiter.o, cmd_in.i)
        connect(m, cmd_in.o, nmc.cmd)
        if self.link is None:
            connect(m, dma.tx, wiring.flipped(self.tx))
            connect(m, wiring.flipped(self.rx), dma.rx)
        else:
            m.submodules.link = link = self.link
            connect(m, decoder.link, link.csr)
            connect(m, dma.tx, link.dma_tx)
            connect(m, link.tx, wiring.flipped(self.tx))
            connect(m, wiring.flipped(self.rx), link.rx)
            connect(m, link.dma_rx, dma.rx)
            connect(m, wiring.flipped(self.ack_i), link.ack_i)
            connect(m, link.ack_o, wiring.flipped(self.ack_o))

        # --- responses: CUs, DMA reads, completed communication writes ------------------------
        # the tag, stream and op from the head's register: they decide where the response
        # goes and, in the DMA's reader, whether it is the one expected; through the ring's
        # select they were the node's critical path (13.2 ns, into the reader's payload
        # buffer).  The data, only stored, stays in the ring
        m.submodules.resp_out = resp_out = SkidBuffer(
            nmc.resp.payload.shape(), registered_out=("tag", "stream", "op"))
        connect(m, nmc.resp, resp_out.i)
        resp = resp_out.o
        r = resp.payload
        is_comm = r.stream == Stream.COMM
        is_read = r.op == Op.READ
        # the local requests' responses: to the CUs, or to the L2, which answers the CUs
        local_resp = l2.mem_resp if l2 is not None else self.resp
        if l2 is not None:
            connect(m, l2.o, wiring.flipped(self.resp))
        m.d.comb += [
            local_resp.payload.eq(r),
            dma.resp.payload.eq(r),
            local_resp.valid.eq(resp.valid & ~is_comm),
            dma.resp.valid.eq(resp.valid & is_comm & is_read),
            self.comm_done.eq(resp.valid & is_comm & ~is_read),
        ]
        with m.If(~is_comm):
            m.d.comb += resp.ready.eq(local_resp.ready)
        with m.Elif(is_read):
            m.d.comb += resp.ready.eq(dma.resp.ready)
        with m.Else():
            m.d.comb += resp.ready.eq(1)
        count(m, cnt["comm_writes"], self.comm_done, 0)
        count(m, cnt["compute_resps"], self.resp.valid & self.resp.ready, 0)
        return m
