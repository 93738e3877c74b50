"""The link layer's test traffic, shared by the Amaranth and cocotb layers: random packets as
a DMA engine sends them, and a wire that loses, corrupts and repeats what it carries."""

import collections


__all__ = ["Wire", "random_packets", "BEAT_FIELDS", "ACK_FIELDS"]


#: The fields of a beat on the wire and of an acknowledgement, with their widths.
def BEAT_FIELDS(params):
    return [("tdata", params.beat_bits), ("tkeep", params.beat_bytes), ("tlast", 1),
            ("tuser", 1)]


def ACK_FIELDS(lparams):
    return [("seq", lparams.seq_bits), ("nak", 1), ("crc", 32)]


def random_packets(rng, params, lparams, count, length=None):
    """``count`` packets of ``length`` beats (default: 1 to ``max_packet_beats`` at random) of
    random data, ``[(tdata, tkeep, tuser)]`` each, ``tuser`` on the first (a DMA header)."""
    out = []
    for _ in range(count):
        n = length or rng.randint(1, lparams.max_packet_beats)
        out.append([(rng.getrandbits(params.beat_bits), rng.getrandbits(params.beat_bytes),
                     int(k == 0)) for k in range(n)])
    return out


class Wire:
    """One direction of a link with a latency, whose items may be dropped, corrupted (a bit
    flipped in one field) or duplicated at the ``rates`` given (``drop``, ``flip``, ``dup``;
    ``lose_from``: every item after that many is lost); ``done`` counts what it did."""

    def __init__(self, rng, latency, rates, fields):
        self.rng, self.latency, self.rates, self.fields = rng, latency, rates, fields
        self.queue = collections.deque()
        self.done = collections.Counter()
        self.sent = 0

    def send(self, now, item):
        r = self.rng.random()
        drop, flip, dup = (self.rates.get(k, 0) for k in ("drop", "flip", "dup"))
        self.sent += 1
        lost = self.rates.get("lose_from")
        if lost is not None and self.sent > lost:
            self.done["lost"] += 1
            return
        if r < drop:
            self.done["dropped"] += 1
            return
        if r < drop + flip:
            name, width = self.rng.choice(self.fields)
            item = dict(item, **{name: item[name] ^ (1 << self.rng.randrange(width))})
            self.done["flipped"] += 1
        self.queue.append((now + self.latency, item))
        if drop + flip <= r < drop + flip + dup:
            self.queue.append((now + self.latency, item))
            self.done["duplicated"] += 1

    def head(self, now):
        """The item due at cycle ``now`` (it stays until :meth:`pop`), or None."""
        return self.queue[0][1] if self.queue and self.queue[0][0] <= now else None

    def pop(self):
        self.queue.popleft()
