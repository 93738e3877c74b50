"""CRC-32 (IEEE 802.3, the polynomial of Ethernet's FCS and PCIe's LCRC: 0x04C11DB7, bits
reflected, register preset to all ones, result inverted) computed on many bits a cycle.

The CRC register's update over an ``n``-bit record is linear over GF(2):
``c' = A c xor B d``.  :func:`update_matrices` derives ``A`` and ``B`` from the bit-serial
definition; the hardware (:func:`crc_update`) XORs the bits each output bit depends on.
Records are taken least significant byte first, each byte least significant bit first, as
:func:`zlib.crc32` takes a byte string, which is the reference the tests hold it to.
"""

import functools

from amaranth import Cat, Const


__all__ = ["POLY", "PRESET", "update_matrices", "crc_update", "serial_update", "finish"]


#: The reflected polynomial (0x04C11DB7 bit-reversed) and the register's preset.
POLY = 0xEDB88320
PRESET = 0xFFFFFFFF


def serial_update(crc, record, bits):
    """The CRC register after ``bits`` bits of ``record`` (an integer, bit 0 first), one bit a
    step: the definition the matrices are derived from."""
    for k in range(bits):
        fb = (crc ^ (record >> k)) & 1
        crc = (crc >> 1) ^ (POLY if fb else 0)
    return crc


def finish(crc):
    """The CRC of a record sequence from its register: inverted."""
    return crc ^ 0xFFFFFFFF


@functools.lru_cache(maxsize=None)
def update_matrices(bits):
    """``(A, B)``: for each of the 32 output bits, the register bits (``A[i]``, a bit mask)
    and the record bits (``B[i]``) whose XOR it is, for a record of ``bits`` bits."""
    a = [0] * 32
    b = [0] * 32
    for j in range(32):
        out = serial_update(1 << j, 0, bits)
        for i in range(32):
            if out >> i & 1:
                a[i] |= 1 << j
    for k in range(bits):
        out = serial_update(0, 1 << k, bits)
        for i in range(32):
            if out >> i & 1:
                b[i] |= 1 << k
    return tuple(a), tuple(b)


def crc_update(crc, record, bits):
    """The Amaranth expression of the CRC register after the ``bits``-bit ``record`` (a
    value) from register ``crc`` (32 bits): each output bit the parity of the register and the
    record under its masks (one AND and one reduction a bit: compact Verilog, word-wide
    operations in a simulator, the same XOR trees after synthesis)."""
    a, b = update_matrices(bits)
    record = record[:bits]
    return Cat(*((crc & Const(a[i], 32)).xor() ^ (record & Const(b[i], bits)).xor()
                 for i in range(32)))
