"""Test environments of the four T3 blocks, one package per block folder: traffic generators,
the Amaranth-simulator driver (``amaranth_sim``), the cocotb tests run on the exported Verilog
(``cocotb_tests``) and the block's experiments (``demo``)."""
