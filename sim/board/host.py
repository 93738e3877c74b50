"""The PC's side of the board (``t3 board run``; ``docs/fpga.md``, "The board"): a small GEMM ->
reduce-scatter -> all-gather on the board's ring, driven over its serial port and checked bit
for bit.

It is the system testbench's own phase script (:class:`sim.system.host.RingHost`: the
driver's configuration, each phase's engine programs, the counters, the ring-ordered numpy
reference) through another transport, :class:`SerialBoard`: the board's registers, reached
through the serial protocol of :mod:`hw.uart` (:mod:`hw.uart_model` is the codec):

- each GPU's configuration port is the window at ``g << window_bits``
  (:class:`system.board.BoardCore`);
- the engines' bulk ports are the board block's ``load_*`` registers, ``start`` and ``done`` its
  ``ctrl`` and ``status`` (:class:`system.board.BoardHost`).

The line is anything with ``async send(data)`` and ``async recv(count)``: :class:`SerialLine`
(pyserial, a real board) or the cocotb testbench's (``sim/board/cocotb_tests.py``), so the
simulation runs exactly the program a PC runs.
"""

from hw.csr import CSR_DATA_BITS
from hw.uart import NAK
from hw.uart_model import answer_length, decode_answers, encode_read, encode_write
from sim.system.host import RingHost
from system.board import BOARD_ID, CTRL, STATUS, board_registers


__all__ = ["SerialLine", "SerialBus", "SerialBoard", "board_host", "BoardError"]


class BoardError(RuntimeError):
    """The board answered something other than what the protocol and its state allow."""


class SerialLine:
    """A serial port through pyserial: ``port`` (e.g. ``/dev/ttyUSB0``) at ``baud``, 8N1;
    a read that waits ``timeout_s`` without the bytes it needs raises :class:`BoardError`."""

    def __init__(self, port, baud, timeout_s=2.0):
        import serial
        try:
            self.port = serial.Serial(port, baud, timeout=timeout_s)
        except (serial.SerialException, OSError) as error:
            raise BoardError(f"cannot open serial port {port}: {error}") from None
        self.timeout_s = timeout_s

    async def send(self, data):
        self.port.write(data)

    async def recv(self, count):
        data = self.port.read(count)
        if len(data) < count:
            raise BoardError(f"the board answered {len(data)} of {count} bytes within "
                             f"{self.timeout_s} s: is the bitstream loaded, the port and baud "
                             f"rate right?")
        return data

    def close(self):
        self.port.close()


class SerialBus:
    """32-bit register access over the bridge's protocol on ``line``.  :meth:`run` sends up to
    :attr:`BATCH` commands before reading their answers (the bridge takes each command as its
    last byte arrives, far faster than the line brings the next, so nothing waits in its
    receive FIFO); an answer other than OKAY raises :class:`BoardError` naming the address."""

    #: commands sent before their answers are read
    BATCH = 64

    def __init__(self, line):
        self.line = line
        self.commands = 0

    async def run(self, commands):
        """``commands``: ``("w", addr, data)`` or ``("r", addr)``; returns the read data, in
        order."""
        out = []
        for at in range(0, len(commands), self.BATCH):
            chunk = commands[at:at + self.BATCH]
            sent = [encode_write(c[1], c[2]) if c[0] == "w" else encode_read(c[1])
                    for c in chunk]
            await self.line.send(b"".join(sent))
            answers = await self.line.recv(sum(answer_length(c[0]) for c in sent))
            for command, (resp, data) in zip(chunk, decode_answers(sent, answers)):
                if resp != 0:
                    what = "NAK" if resp == NAK else f"resp {resp}"
                    kind = "write" if command[0] == "w" else "read"
                    raise BoardError(f"{kind} of byte address 0x{command[1]:x}: {what}")
                if data is not None:
                    out.append(data)
            self.commands += len(chunk)
        return out

    async def write(self, addr, data):
        await self.run([("w", addr, data)])

    async def read(self, addr):
        return (await self.run([("r", addr)]))[0]


class _Window:
    """GPU ``g``'s configuration port inside the board's address map: a batch is one
    :meth:`SerialBus.run`, its commands sent :attr:`SerialBus.BATCH` at a time."""

    def __init__(self, bus, base):
        self.bus, self.base = bus, base

    async def write_words(self, pairs):
        await self.bus.run([("w", self.base + addr, data) for addr, data in pairs])

    async def read_words(self, addresses):
        return await self.bus.run([("r", self.base + addr) for addr in addresses])


class _Windows:
    """Every GPU's :class:`_Window` as the group a transport's ``cfg_ports`` gives:
    ``write(batches)`` and ``read(batches)``, a batch per GPU, one after the other (one
    serial line)."""

    def __init__(self, windows):
        self.windows = windows

    async def write(self, batches):
        for window, pairs in zip(self.windows, batches):
            await window.write_words(pairs)

    async def read(self, batches):
        return [await window.read_words(addrs) for window, addrs in zip(self.windows, batches)]


class SerialBoard:
    """The transport of :class:`sim.system.host.RingHost` (see there) on a board
    (:class:`system.board.BoardCore` of ``bparams``) behind the serial ``line``: the GPUs'
    configuration ports are their windows, the engines' bulk ports, ``start`` and ``done`` the
    board block's registers.  The board's clock is not visible from here: ``simulated_cycles``
    is 0, the phases' cycles are the engines' own counters.

    ``poll_limit``: reads of ``status`` a phase may take before it is declared stuck (by
    default as many as fit the host's cycle limit of a phase: a read is ten bytes on the
    line, 100 bit times)."""

    simulated_cycles = out_of_reset = 0

    def __init__(self, line, bparams, poll_limit=None):
        self.bparams = bparams
        self.bus = SerialBus(line)
        self.board = board_registers(bparams)
        self.board_base = bparams.gpus << bparams.window_bits
        self.poll_limit = poll_limit

    def cfg_ports(self, gpus):
        self.gpus = gpus
        return _Windows([_Window(self.bus, g << self.bparams.window_bits)
                         for g in range(gpus)])

    def ring_counters(self, names):
        return None

    def report(self):
        return {"serial_commands": self.bus.commands}

    async def sleep(self, cycles):
        raise NotImplementedError("the board's timeline is not sampled (its clock is not "
                                  "visible over the serial line)")

    def _board(self, name, value):
        return [("w", self.board_base + 4 * a, word)
                for a, word in self.board.word_writes(name, value)]

    def _board_addr(self, name, word=0):
        return self.board_base + 4 * (self.board.address(name) + word)

    async def reset(self):
        """Check that a T3 board answers (its ``id``), with the ring this program expects."""
        ident = await self.bus.read(self._board_addr("id"))
        if ident != BOARD_ID:
            raise BoardError(f"the board's id reads 0x{ident:08x}, not 0x{BOARD_ID:08x}: not "
                             f"a T3 board, or another version of its register map")
        gpus = await self.bus.read(self._board_addr("gpus"))
        if gpus != self.gpus:
            raise BoardError(f"the board has {gpus} GPUs, the workload {self.gpus}")
        await self.bus.write(self._board_addr("status"), STATUS.mask("bad_gpu"))

    async def load(self, beats):
        """``beats[g]``: ``[(address, beat)]`` written through GPU ``g``'s bulk port."""
        words = self.board["load_data"].words
        write = CTRL.encode(write=1)
        for g, items in enumerate(beats):
            commands = self._board("load_gpu", g)
            expect = None
            for addr, beat in items:
                if addr != expect:
                    commands += self._board("load_addr", addr)
                commands += self._board("load_data", beat)[:words]
                commands.append(("w", self._board_addr("ctrl"), write))
                expect = addr + 1
            await self.bus.run(commands)
        await self._check_status()

    async def read_local(self, first, count):
        """``count`` beats of every GPU's engine memory from local beat ``first``."""
        out = []
        read = CTRL.encode(read=1)
        words = self.board["load_rdata"].words
        for g in range(self.gpus):
            commands = self._board("load_gpu", g) + self._board("load_addr", first)
            for _ in range(count):
                # the next command arrives a whole command later: ``load_rdata`` is long
                # valid (READ_LATENCY cycles)
                commands.append(("w", self._board_addr("ctrl"), read))
                commands += [("r", self._board_addr("load_rdata", k)) for k in range(words)]
            data = await self.bus.run(commands)
            out.append([sum(w << (CSR_DATA_BITS * k) for k, w in
                            enumerate(data[b * words:(b + 1) * words])) for b in range(count)])
        await self._check_status()
        return out

    async def _check_status(self):
        status = STATUS.decode(await self.bus.read(self._board_addr("status")))
        if status["bad_gpu"]:
            raise BoardError("the board latched status.bad_gpu: a bulk access named a GPU "
                             "beyond its ring")

    async def start_and_wait(self, name, limit):
        polls = self.poll_limit or limit // (100 * self.bparams.divisor) + 10
        await self.bus.write(self._board_addr("ctrl"), CTRL.encode(start=1))
        for _ in range(polls):
            if STATUS.decode(await self.bus.read(self._board_addr("status")))["done"]:
                return None
        return f"{polls} polls of status"


def board_host(line, bparams, wl, config, progress=None, poll_limit=None):
    """The host (:class:`sim.system.host.RingHost`) of one configuration run of ``wl`` on
    the board of ``bparams`` behind the serial ``line``."""
    host = RingHost(SerialBoard(line, bparams, poll_limit), bparams.params, bparams.nparams,
                    bparams.engine, wl, config, progress)
    host.bandwidth = (bparams.link_num, bparams.link_den)
    return host
