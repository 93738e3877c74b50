"""Link faults for the DMA engine's loopback, and the scoreboard that judges a faulty run.

:class:`LinkFaults` damages frames between ``tx`` and ``rx`` (seeded): a beat dropped or
duplicated, a frame cut short without ``tlast`` (what a sender reset or a broken cable looks
like to the receiver), a header bit flipped, ``tlast`` or ``tuser`` flipped on a beat.
:func:`check_delivery` then holds the receiver to its promise: every packet sent is either
written intact where its header says, or reported (the errors counter counts at least one event
per packet not delivered intact, or ``status.rx_open`` says the last one is incomplete), and
nothing is ever written outside the destinations of the packets sent.

The promise is for single faults: a fault is followed by at least one clean frame.  Payload
beats carry no check and no sequence number (that is the link layer's CRC, below this
interface), so two faults in neighbouring frames can make one well-formed packet of two broken
ones (a header left without its payload, then a payload whose header was lost: the payload
lands inside the first header's range, unreported); for the same reason payload bits are not
flipped here.
"""

import collections
import random

from dma.config import HEADER_CHECK_BITS, header_layout
from dma.model import DMAModel, frames_to_packets, packet_addresses


__all__ = ["KINDS", "LinkFaults", "check_delivery"]


KINDS = ("drop", "duplicate", "truncate", "corrupt_header", "flip_tlast", "flip_tuser")


class LinkFaults:
    """``LinkFaults(params, dparams, kinds, rate, seed)``: each frame meets one fault of a kind
    drawn from ``kinds`` with probability ``rate``, except the frame right after a faulty one;
    ``injected`` counts them by kind."""

    def __init__(self, params, dparams, kinds=KINDS, rate=0.3, seed=0):
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; known: {KINDS}")
        self.kinds, self.rate = tuple(kinds), rate
        self.rng = random.Random(seed)
        self.header_bits = header_layout(params, dparams).size + HEADER_CHECK_BITS
        self.injected = collections.Counter()
        self.last_faulty = False

    def __call__(self, frame):
        beats = [tuple(b) for b in frame]
        if self.last_faulty or not self.kinds or self.rng.random() >= self.rate:
            self.last_faulty = False
            return beats
        self.last_faulty = True
        kind = self.rng.choice(self.kinds)
        i = self.rng.randrange(len(beats))
        if kind == "truncate" and len(beats) < 2:
            kind = "drop"
        self.injected[kind] += 1
        if kind == "drop":
            del beats[i]
        elif kind == "duplicate":
            beats.insert(i, beats[i])
        elif kind == "truncate":
            beats = [b[:3] + (0,) for b in beats[:self.rng.randrange(1, len(beats))]]
        elif kind == "corrupt_header":
            d, k, u, last = beats[0]
            beats[0] = (d ^ (1 << self.rng.randrange(self.header_bits)), k, u, last)
        elif kind == "flip_tlast":
            d, k, u, last = beats[i]
            beats[i] = (d, k, u, last ^ 1)
        elif kind == "flip_tuser":
            d, k, u, last = beats[i]
            beats[i] = (d, k, u ^ 1, last)
        return beats


def check_delivery(params, dparams, env, regs, gpu_id=0):
    """Judge a run whose link met faults (see the module documentation); returns
    ``(intact, broken)`` packet counts.  Raises ``AssertionError`` naming the first breach."""
    packets = frames_to_packets(env.frames, env.hdr_pk)
    model = DMAModel(params, dparams, [], gpu_id)
    writes = [req for _, req in env.writes]
    keys = ("addr", "data", "mask", "op", "etype", "source", "tracked", "wg_id", "wf_id")
    allowed = set()
    at = intact = broken = 0
    for pk in packets:
        want = [{k: r[k] for k in keys} for r in model.receive(pk, count=False)]
        allowed.update(packet_addresses(params, pk.header))
        found = None
        for start in range(at, len(writes) - len(want) + 1):
            if all({k: writes[start + j][k] for k in keys} == w for j, w in enumerate(want)):
                found = start
                break
        if found is None:
            broken += 1
        else:
            intact += 1
            at = found + len(want)
    stray = [r["addr"] for r in writes if r["addr"] not in allowed]
    assert not stray, f"writes outside every packet's destination: {[hex(a) for a in stray]}"
    from dma.config import Status
    reported = regs["errors"] + bool(regs["status"] & Status.RX_OPEN)
    assert reported >= broken, \
        f"{broken} packets not delivered intact but only {regs['errors']} errors reported" \
        f"{' and one left open' if reported > regs['errors'] else ''}"
    return intact, broken
