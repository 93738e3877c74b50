"""The DMA engine's send side: tiles and remote-store runs onto the link, one packet at a time
(paper section 4.2.2: a triggered tile leaves for the next GPU).  ``dma.model.check_packetized``
is its scoreboard."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.interfaces import link_signature
from hw.params import T3Params
from .config import DMAParams, header_check_of, header_layout


__all__ = ["Packetizer", "TX_EVENTS", "run_beat_layout"]


#: What the send side reports, one pulse each: a tile's header sent, a remote run's header
#: sent, a tile's payload beat sent, a remote run's payload beat sent.
TX_EVENTS = ("tile", "run", "tile_beat", "run_beat")


def run_beat_layout(params: T3Params):
    """A remote store's beat as it waits to be sent: its data and its byte enables."""
    return data.StructLayout({"data": params.beat_bits, "keep": params.beat_bytes})


class Packetizer(wiring.Component):
    """Tiles and remote runs onto the link.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    dparams : :class:`dma.config.DMAParams`

    Ports
    -----
    tile_hdr : In(stream.Signature(:func:`dma.config.header_layout`))
        A tile's header (from the tile reader, :class:`dma.reader.TileReader`); ``beats`` of
        its payload follow on ``tile_data``.
    tile_data : In(stream.Signature(``beat_bits``))
        The tiles' payload beats, in order (the read responses).
    run_hdr : In(stream.Signature(:func:`dma.config.header_layout`))
        A run of remote stores' header; ``beats`` of them follow on ``run_data``.
    run_data : In(stream.Signature(:func:`run_beat_layout`))
        The remote stores' beats and byte enables, in order.
    tx : Out(:func:`hw.interfaces.link_signature`)
        The packets: the header beat (``tuser``; the header and its check field, the rest of
        the beat zero; ``tkeep`` all ones) then its payload beats (a tile's ``tkeep`` all ones,
        a store's its byte enables), ``tlast`` on the last.
    events : Out(``TX_EVENTS``)
        One-cycle pulses in the cycle of the beat's handshake on ``tx``.

    Timing
    ------
    Between packets the two kinds take turns (a run after a tile and a tile after a run when
    both wait; whichever waits alone goes).  A tile's header waits until its first payload
    beat is there, so that the link does not idle inside a packet for the memory's latency; a
    header offered and not taken stays the one offered.  With ``tx.tready`` high a packet of
    ``n`` payload beats takes ``n + 1`` cycles when its beats are there; ``tile_data.ready``
    and ``run_data.ready`` are ``tx.tready`` while their packet is sent.
    """

    def __init__(self, params: T3Params, dparams: DMAParams):
        self.params, self.dparams = params, dparams
        self.hdr_layout = header_layout(params, dparams)
        super().__init__({
            "tile_hdr":  In(stream.Signature(self.hdr_layout)),
            "tile_data": In(stream.Signature(params.beat_bits)),
            "run_hdr":   In(stream.Signature(self.hdr_layout)),
            "run_data":  In(stream.Signature(run_beat_layout(params))),
            "tx":        Out(link_signature(params)),
            "events":    Out(data.StructLayout({k: 1 for k in TX_EVENTS})),
        })

    def elaborate(self, platform):
        m = Module()
        p, dp = self.params, self.dparams
        tx, ev = self.tx, self.events
        H = self.hdr_layout.as_shape().width
        all_keep = (1 << p.beat_bytes) - 1
        tile_hdr, tile_data = self.tile_hdr, self.tile_data
        run_hdr, run_data = self.run_hdr, self.run_data

        prefer_remote = Signal()
        lock, lock_remote = Signal(name="lock"), Signal(name="lock_remote")
        tx_left = Signal(dp.len_bits)
        tx_last = Signal()          # tx_left == 1, kept with it
        tx_hs = Signal()
        m.d.comb += tx_hs.eq(tx.tvalid & tx.tready)

        with m.FSM(name="packetize"):
            with m.State("IDLE"):
                rem_valid = run_hdr.valid
                tile_ready = tile_hdr.valid & tile_data.valid
                pick_remote = Signal()
                m.d.comb += pick_remote.eq(Mux(lock, lock_remote,
                                               rem_valid & (prefer_remote | ~tile_ready)))
                run_word = run_hdr.payload.as_value()
                tile_word = tile_hdr.payload.as_value()
                with m.If(pick_remote):
                    m.d.comb += [tx.tvalid.eq(rem_valid),
                                 tx.tdata.eq(Cat(run_word, header_check_of(run_word, H)))]
                with m.Else():
                    # a tile's header waits for its first payload beat, so that the link
                    # never idles inside a packet for the memory's latency
                    m.d.comb += [tx.tvalid.eq(tile_ready),
                                 tx.tdata.eq(Cat(tile_word, header_check_of(tile_word, H)))]
                m.d.comb += [tx.tuser.eq(1), tx.tkeep.eq(all_keep), tx.tlast.eq(0)]
                m.d.sync += [lock.eq(tx.tvalid & ~tx.tready), lock_remote.eq(pick_remote)]
                # each header's ready without its own valid (a queue's read port ignores a
                # read while it is empty): the handshake is the same, and the queue's read
                # no longer waits for its own valid through the pick and tvalid (the node's
                # worst path, 11.6 ns at seed 2): the pick with both headers there, a tile's
                # with its first beat there
                m.d.comb += [
                    run_hdr.ready.eq(tx.tready & Mux(lock, lock_remote,
                                                     prefer_remote | ~tile_ready)),
                    tile_hdr.ready.eq(tx.tready & tile_data.valid & ~Mux(
                        lock, lock_remote, rem_valid & prefer_remote)),
                ]
                with m.If(tx_hs):
                    m.d.sync += prefer_remote.eq(~pick_remote)
                    with m.If(pick_remote):
                        m.d.comb += ev.run.eq(1)
                        m.d.sync += [tx_left.eq(run_hdr.payload.beats),
                                     tx_last.eq(run_hdr.payload.beats == 1)]
                        m.next = "REMOTE"
                    with m.Else():
                        m.d.comb += ev.tile.eq(1)
                        m.d.sync += [tx_left.eq(tile_hdr.payload.beats),
                                     tx_last.eq(tile_hdr.payload.beats == 1)]
                        m.next = "TILE"
            with m.State("TILE"):
                m.d.comb += [
                    tx.tvalid.eq(tile_data.valid), tx.tdata.eq(tile_data.payload),
                    tx.tkeep.eq(all_keep), tx.tlast.eq(tx_last),
                    tile_data.ready.eq(tx.tready), ev.tile_beat.eq(tx_hs),
                ]
                with m.If(tx_hs):
                    m.d.sync += [tx_left.eq(tx_left - 1), tx_last.eq(tx_left == 2)]
                    with m.If(tx_last):
                        m.next = "IDLE"
            with m.State("REMOTE"):
                m.d.comb += [
                    tx.tvalid.eq(run_data.valid), tx.tdata.eq(run_data.payload.data),
                    tx.tkeep.eq(run_data.payload.keep), tx.tlast.eq(tx_last),
                    run_data.ready.eq(tx.tready), ev.run_beat.eq(tx_hs),
                ]
                with m.If(tx_hs):
                    m.d.sync += [tx_left.eq(tx_left - 1), tx_last.eq(tx_left == 2)]
                    with m.If(tx_last):
                        m.next = "IDLE"
        return m

