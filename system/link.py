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

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hw.interfaces import link_signature
from hw.params import T3Params, check_int


__all__ = ["LinkModel", "check_link"]


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
