"""Golden model of the board block (:class:`system.board.BoardHost`): its registers, word by
word, and what its commands do to the GPUs' bulk-port memories."""

from hw.csr import CSR_DATA_BITS
from system.board import BOARD_ID, CTRL, STATUS, board_registers


__all__ = ["BoardHostModel"]


class BoardHostModel:
    """The board block as the host sees it through its registers.

    ``memories[g]``: GPU ``g``'s bulk-port memory as ``{beat address: beat}`` (unwritten beats
    read as ``0``); ``starts``: how many ``ctrl.start`` commands were given; ``done``: the value
    ``status.done`` reads (the engines' state, set by the test)."""

    def __init__(self, bparams):
        self.bparams = bparams
        self.regs = board_registers(bparams)
        self.memories = [{} for _ in range(bparams.gpus)]
        self.starts = 0
        self.done = 0
        self.uart = 0
        self.words = {}                     # word address -> value of the rw registers
        for reg in self.regs.regs:
            if reg.access == "rw":
                for addr, word in self.regs.word_writes(reg.name, reg.reset):
                    self.words[addr] = word
        self.rdata = 0
        self.bad_gpu = 0

    def value(self, name):
        """The current value of ``rw`` register ``name``."""
        base = self.regs.address(name)
        return self.regs.from_words(name, [self.words[base + k]
                                           for k in range(self.regs[name].words)])

    def _set(self, name, value):
        for addr, word in self.regs.word_writes(name, value % (1 << self.regs[name].width)):
            self.words[addr] = word

    def write(self, word, data):
        """A host write of ``data`` to word address ``word``."""
        if word in self.words:
            for reg in self.regs.regs:
                base = self.regs.address(reg.name)
                if reg.access == "rw" and base <= word < base + reg.words:
                    width = min(CSR_DATA_BITS, reg.width - (word - base) * CSR_DATA_BITS)
                    self.words[word] = data & ((1 << width) - 1)
            return
        if word == self.regs.address("status"):
            self.bad_gpu &= ~STATUS.decode(data)["bad_gpu"]
            return
        if word != self.regs.address("ctrl"):
            return
        ctrl = CTRL.decode(data)
        gpu, addr = self.value("load_gpu"), self.value("load_addr")
        if ctrl["start"]:
            self.starts += 1
        if ctrl["write"] or ctrl["read"]:
            if gpu >= self.bparams.gpus:
                self.bad_gpu = 1
                return
            if ctrl["write"]:               # both: the write, then the read of the next beat
                self.memories[gpu][addr] = self.value("load_data")
                addr += 1
            if ctrl["read"]:
                self.rdata = self.memories[gpu].get(addr % (1 << self.regs["load_addr"].width), 0)
                addr += 1
            self._set("load_addr", addr)

    def read(self, word):
        """What a host read of word address ``word`` returns (after any ``read`` command has
        had its :data:`system.board.READ_LATENCY` cycles)."""
        if word in self.words:
            return self.words[word]
        values = {"id": BOARD_ID, "uart": self.uart, "gpus": self.bparams.gpus,
                  "load_rdata": self.rdata,
                  "status": STATUS.encode(done=self.done, bad_gpu=self.bad_gpu)}
        for name, value in values.items():
            base = self.regs.address(name)
            if base <= word < base + self.regs[name].words:
                return (value >> ((word - base) * CSR_DATA_BITS)) & ((1 << CSR_DATA_BITS) - 1)
        return 0
