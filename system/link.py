"""A synthesizable model of one direction of an inter-GPU link: latency and bandwidth.

The paper's ring has 150 GB/s bi-directional links with 500 ns latency; a scaled model keeps
their ratios to the memory's bandwidth (see ``docs/system.md``).  Bandwidth is a fraction
``num / den`` of a beat per cycle (a token bucket: ``num`` tokens arrive per cycle, a beat costs
``den``, at most one beat is in credit); latency is the number of cycles from a beat's
acceptance at ``i`` to the earliest cycle it is offered on ``o``.

With ``charge_headers=False`` a packet's header beat (``tuser``) costs no tokens: the bandwidth
is the payload's, the paper's "simple link bandwidth and latency model" (section 5.1.1), in
which only the data a GPU sends takes link time.  A header needs no tokens, only a cycle of
the wire.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hw.interfaces import link_signature
from hw.params import T3Params, check_int
from linklayer.config import LinkLayerParams, ack_signature


__all__ = ["LinkModel", "AckLink", "LinkFaults", "check_link", "FAULT_KINDS",
           "FAULT_RATE_BITS"]


def check_link(latency, num, den):
    """Refuse link settings the model cannot honour, naming the field."""
    for name, value, lo in (("latency", latency, 2), ("bandwidth numerator", num, 1),
                            ("bandwidth denominator", den, 1)):
        check_int(f"link {name}", value, lo)
    if latency >= 1 << 24:
        raise ValueError(f"link latency must be below 2**24 cycles, not {latency}")
    if num > den:
        raise ValueError(f"link bandwidth {num}/{den} exceeds one beat per cycle")


class LinkModel(wiring.Component):
    """One link direction.

    Parameters
    ----------
    latency : int
        Cycles from acceptance to the earliest offer on ``o`` (>= 2: the queue's own latency).
    num, den : int
        Bandwidth ``num / den`` beats per cycle (<= 1).
    charge_headers : bool
        Whether a header beat (``tuser = 1``) costs a beat's bandwidth (default) or only its
        cycle on the wire.
    depth : int
        Beats in flight; by default enough to sustain the bandwidth over the latency
        (``ceil(latency * num / den) + 2``).

    Ports
    -----
    i : In(link_signature)
        From the sender; ``tready`` is low while the bandwidth's tokens are short or the
        link is full.
    o : Out(link_signature)
        To the receiver, in order, each beat unchanged.
    """

    def __init__(self, params: T3Params, latency=4, num=1, den=1, depth=None,
                 charge_headers=True):
        check_link(latency, num, den)
        self.params, self.latency, self.num, self.den = params, latency, num, den
        self.charge_headers = bool(charge_headers)
        self.depth = depth or -(-latency * num // den) + 2
        super().__init__({"i": In(link_signature(params)), "o": Out(link_signature(params))})

    def elaborate(self, platform):
        m = Module()
        p = self.params
        now = Signal(32)      # time stamps wrap after 2**32 cycles
        m.d.sync += now.eq(now + 1)
        width = p.beat_bits + p.beat_bytes + 2
        m.submodules.q = q = SyncFIFOBuffered(width=width + len(now), depth=self.depth)
        tokens = Signal(range(2 * self.den + 1), init=self.den)
        can = tokens >= self.den
        if not self.charge_headers:     # a header needs only the wire
            can = can | self.i.tuser
        m.d.comb += [
            self.i.tready.eq(q.w_rdy & can),
            q.w_en.eq(self.i.tvalid & can),
            q.w_data.eq(Cat(self.i.tdata, self.i.tkeep, self.i.tlast, self.i.tuser, now)),
        ]
        take = self.i.tvalid & self.i.tready
        if not self.charge_headers:
            take = take & ~self.i.tuser
        refill = tokens + self.num - (take * self.den)
        # at most one beat (plus the fraction of the next) in credit: an idle link does not
        # store up a burst, a busy one keeps its exact average num / den
        cap = self.den + self.num - 1
        with m.If(refill > cap):
            m.d.sync += tokens.eq(cap)
        with m.Else():
            m.d.sync += tokens.eq(refill)
        head = q.r_data
        stamp = head[width:]
        age = Signal(len(now))
        m.d.comb += age.eq(now - stamp)
        due = age >= self.latency
        b = p.beat_bits
        m.d.comb += [
            self.o.tdata.eq(head[:b]),
            self.o.tkeep.eq(head[b:b + p.beat_bytes]),
            self.o.tlast.eq(head[b + p.beat_bytes]),
            self.o.tuser.eq(head[b + p.beat_bytes + 1]),
            self.o.tvalid.eq(q.r_rdy & due),
            q.r_en.eq(self.o.tready & due),
        ]
        return m


class AckLink(wiring.Component):
    """The link layer's acknowledgements on their way back: each message offered on ``o``
    exactly ``latency`` cycles after it arrived on ``i`` (the links' latency; an
    acknowledgement is a few bits beside a link's beats, and costs it no bandwidth).  The
    channel has no backpressure: a message that finds ``depth`` in flight is lost, which the
    sender's timeout covers (``lost`` counts them).

    Ports: ``i`` (``In(ack_signature)``), ``o`` (``Out``), ``lost`` (``Out(32)``).
    """

    def __init__(self, lparams: LinkLayerParams, latency, depth=16):
        check_int("latency", latency, 2)
        self.lparams, self.latency, self.depth = lparams, latency, depth
        super().__init__({"i": In(ack_signature(lparams)), "o": Out(ack_signature(lparams)),
                          "lost": Out(32)})

    def elaborate(self, platform):
        m = Module()
        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        msg = Cat(self.i.nak, self.i.seq, self.i.crc)
        m.submodules.q = q = SyncFIFOBuffered(width=len(msg) + len(now), depth=self.depth)
        m.d.comb += [q.w_en.eq(self.i.valid), q.w_data.eq(Cat(msg, now))]
        with m.If(self.i.valid & ~q.w_rdy):
            m.d.sync += self.lost.eq(self.lost + 1)
        head = q.r_data
        stamp = head[len(msg):]
        # the queue's output register adds a cycle of its own: offered when latency - 1 old
        due = (now - stamp)[:32] >= self.latency - 1
        out = Signal()
        m.d.comb += [out.eq(q.r_rdy & due), q.r_en.eq(out)]
        m.d.sync += [self.o.valid.eq(out), Cat(self.o.nak, self.o.seq, self.o.crc).eq(head)]
        return m


#: The faults :class:`LinkFaults` injects, bits of its ``kinds`` input.
FAULT_KINDS = ("drop", "flip", "dup")

#: Bits of a fault rate: a beat is hit with probability ``rate / 2**FAULT_RATE_BITS``
#: (2**-24 = 6.0e-8 at the least).
FAULT_RATE_BITS = 24


class LinkFaults(wiring.Component):
    """Faults on a link's wire and its acknowledgements, at random: after a beat leaves the
    link (``i`` to ``o``), with probability ``rate / 2**24`` it is dropped, one bit of it
    flipped (of ``tdata``, ``tkeep``, ``tlast`` or ``tuser``), or sent twice; an
    acknowledgement (``ack_i`` to ``ack_o``) is dropped or one bit of it flipped at the same
    rate.  ``kinds`` enables each of :data:`FAULT_KINDS` (a hit picks among the enabled
    ones).  A 32-bit Galois LFSR per injector (``seed``: its start, distinct per link) draws
    the chances; the same seed gives the same faults on the same traffic.

    Ports: ``i``, ``o`` (link), ``ack_i``, ``ack_o`` (acknowledgements), ``rate``
    (``In(24)``), ``kinds`` (``In(3)``), ``dropped``, ``flipped``, ``duplicated``,
    ``acks_hit`` (``Out(32)``: what it did).
    """

    def __init__(self, params: T3Params, lparams: LinkLayerParams, seed=1):
        if not 1 <= seed < 1 << 32:
            raise ValueError(f"seed must be from 1 to 2**32 - 1, not {seed!r}")
        self.params, self.lparams, self.seed = params, lparams, seed
        super().__init__({
            "i": In(link_signature(params)), "o": Out(link_signature(params)),
            "ack_i": In(ack_signature(lparams)), "ack_o": Out(ack_signature(lparams)),
            "rate": In(FAULT_RATE_BITS), "kinds": In(len(FAULT_KINDS)),
            "dropped": Out(32), "flipped": Out(32), "duplicated": Out(32), "acks_hit": Out(32),
        })

    @staticmethod
    def _lfsr(m, seed, name):
        state = Signal(32, init=seed, name=name)
        # x^32 + x^22 + x^2 + x + 1 (maximal), Galois form
        m.d.sync += state.eq(Mux(state[0], (state >> 1) ^ 0x80200003, state >> 1))
        return state

    def elaborate(self, platform):
        m = Module()
        p = self.params
        beat = Cat(self.i.tdata, self.i.tkeep, self.i.tlast, self.i.tuser)
        width = len(beat)
        rnd = self._lfsr(m, self.seed, "rnd")
        rnd2 = self._lfsr(m, (self.seed ^ 0x5A5A5A5A) or 1, "rnd2")
        hit = rnd[:FAULT_RATE_BITS] < self.rate
        # the kind: the first enabled one at or after rnd[24:26] (3 reads as 0), in order
        pick = Signal(2)
        start = Mux(rnd[24:26] == 3, 0, rnd[24:26])
        order = [[(k + j) % 3 for j in range(3)] for k in range(3)]
        with m.Switch(start):
            for k in range(3):
                with m.Case(k):
                    chosen = Const(3, 2)
                    for kind in reversed(order[k]):
                        chosen = Mux(self.kinds[kind], kind, chosen)
                    m.d.comb += pick.eq(chosen)
        bit = Signal(range(width))
        m.d.comb += bit.eq(rnd2[:len(bit)] % width if (1 << len(bit)) != width
                           else rnd2[:len(bit)])
        flipped = Signal(width)
        m.d.comb += flipped.eq(beat ^ (Const(1, width) << bit))

        again = Signal()                        # the beat is sent a second time next
        held = Signal(width)
        out = Signal(width)
        take = self.i.tvalid & self.i.tready
        fault = hit & (self.kinds != 0)
        with m.If(again):
            m.d.comb += [out.eq(held), self.o.tvalid.eq(1), self.i.tready.eq(0)]
            with m.If(self.o.tready):
                m.d.sync += again.eq(0)
        with m.Else():
            drop = fault & (pick == 0)
            flip = fault & (pick == 1)
            dup = fault & (pick == 2)
            m.d.comb += [out.eq(Mux(flip, flipped, beat)),
                         self.o.tvalid.eq(self.i.tvalid & ~drop),
                         self.i.tready.eq(self.o.tready | drop)]
            with m.If(take):
                with m.If(drop):
                    m.d.sync += self.dropped.eq(self.dropped + 1)
                with m.If(flip):
                    m.d.sync += self.flipped.eq(self.flipped + 1)
                with m.If(dup):
                    m.d.sync += [again.eq(1), held.eq(beat),
                                 self.duplicated.eq(self.duplicated + 1)]
        b = p.beat_bits
        m.d.comb += [self.o.tdata.eq(out[:b]), self.o.tkeep.eq(out[b:b + p.beat_bytes]),
                     self.o.tlast.eq(out[b + p.beat_bytes]),
                     self.o.tuser.eq(out[b + p.beat_bytes + 1])]

        # acknowledgements: dropped (kind drop or dup) or a bit flipped (kind flip)
        msg = Cat(self.ack_i.nak, self.ack_i.seq, self.ack_i.crc)
        ack_bit = Signal(range(len(msg)))
        m.d.comb += ack_bit.eq(rnd2[8:8 + len(ack_bit)] % len(msg))
        ack_hit = self.ack_i.valid & (rnd2[8:8 + FAULT_RATE_BITS] < self.rate) & \
            (self.kinds != 0)
        can_drop = self.kinds[0] | self.kinds[2]
        ack_flip = ack_hit & self.kinds[1] & (rnd2[0] | ~can_drop)
        ack_out = Signal(len(msg))
        m.d.comb += [
            ack_out.eq(Mux(ack_flip, msg ^ (Const(1, len(msg)) << ack_bit), msg)),
            self.ack_o.valid.eq(self.ack_i.valid & ~(ack_hit & ~ack_flip)),
            Cat(self.ack_o.nak, self.ack_o.seq, self.ack_o.crc).eq(ack_out),
        ]
        with m.If(ack_hit):
            m.d.sync += self.acks_hit.eq(self.acks_hit + 1)
        return m
