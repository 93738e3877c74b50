"""The board's host program (``host``) and its cocotb testbench (``cocotb_tests``): the
program a PC runs against ``t3 synth board``'s bitstream, run in simulation through the same
serial pins."""
