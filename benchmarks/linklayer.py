"""Link layer figures (``t3 bench linklayer`` or ``python -m benchmarks.linklayer``).

- ``linklayer.wire_share.<B>beat``: the DMA's beats over all beats the sender puts on the wire,
  packets of ``B`` beats (a tile's header and payload) through a clean wire at a beat a cycle;
  limit ``B / (B + 1)`` (one trailer a packet: the link layer's whole bandwidth cost).
- ``linklayer.cycles_per_packet.<B>beat``: cycles between deliveries in steady state (cocotb,
  exported Verilog, the receiver checked against the golden model); limit ``B + 1``.
- ``linklayer.replay_beats.ring``: the replay buffer the ring's links need for line rate
  (:meth:`linklayer.config.LinkLayerParams.round_trip_beats`), against the default's.
- ``linklayer.<tx|rx>.synth.<target>.<resource>``: Yosys cell counts of the sender and the
  receiver, default geometry, 256-bit beats.
- ``linklayer.ring.faults_<rate>``: ``t3 run``'s default 4-GPU run with the link layer and
  faults of every kind injected on every link at ``rate`` per beat (1e-6 to 1e-2): whether it
  ended bit-exact (limit: every run), the faults by kind, the retries, and its cycles against
  the clean run's.
"""

import sys

from hw.params import T3Params
from linklayer.config import LinkLayerParams


#: Packet lengths measured: the ring's tile packets (a 16 x 16 fp16 tile in 256-bit beats and
#: its header: 17 beats) and the longest the default geometry takes.
LENGTHS = (17, 64)
PACKETS, LATENCY = 200, 10

#: The fault rates per beat of the ring campaign.
RATES = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)


def ring_campaign(sim="verilator", rates=RATES):
    """``linklayer.ring`` lines: the default run clean, then at each of ``rates``."""
    from sim.system.run import run_config
    from sim.system.workload import workload_spec
    spec = workload_spec(4)
    clean = run_config(spec, 4, "t3", sim=sim, linklayer=True)
    lines = [f"linklayer.ring.clean: {clean['cycles']} cycles, verified {clean['verified']} "
             f"({clean['linklayer']['tx_packets']} packets, "
             f"{clean['simulated_cycles'] / clean['wall_s']:.0f} simulated cycles/s)"]
    for rate in rates:
        r = run_config(spec, 4, "t3", sim=sim, linklayer=True,
                       faults={"rate": rate, "kinds": ("drop", "flip", "dup")})
        f, ll = r["faults"], r["linklayer"]
        lines.append(
            f"linklayer.ring.faults_{rate:g}: verified {r['verified']} (limit: every run); "
            f"{f['faults_dropped']} dropped, {f['faults_flipped']} flipped, "
            f"{f['faults_duplicated']} duplicated, {f['faults_acks']} acknowledgements hit; "
            f"{ll['tx_replayed']} packets replayed ({ll['tx_naks']} NAKs, {ll['tx_timeouts']} "
            f"timeouts), {ll['rx_crc_errors']} CRC, {ll['rx_seq_errors']} sequence, "
            f"{ll['rx_duplicates']} duplicate drops; {r['cycles']} cycles, ratio "
            f"{r['cycles'] / clean['cycles']:.3f} to the clean run")
    return lines


def line_rate(sim, length, packets=PACKETS):
    from linklayer.rtl import LinkPair
    from sim.harness.runner import run_for_result
    from sim.blocks.linklayer.cocotb_tests import VERILATOR_ARGS
    params, lparams = T3Params(), LinkLayerParams()
    config = {"params": params.to_dict(), "lparams": lparams.to_dict(), "seed": 1,
              "packets": packets, "length": length, "latency": LATENCY, "valid_p": 1.0,
              "ready_p": 1.0, "cycles": packets * (length + 1) * 4 + 1000}
    return run_for_result(LinkPair(params, lparams), "t3_link_pair",
                          "sim.blocks.linklayer.cocotb_tests", "bench_link", config, sim,
                          verilator_args=VERILATOR_ARGS if sim == "verilator" else ())


def main(sims=None, synth=True):
    from system.spec import LINK_BANDWIDTH, LINK_LATENCY
    sim = (sims or ["verilator"])[0]
    for length in LENGTHS:
        r = line_rate(sim, length)
        share = PACKETS * length / r["wire_beats"]
        limit = length / (length + 1)
        per = (r["last_delivery"] - r["first_delivery"]) / (PACKETS - 1)
        print(f"linklayer.wire_share.{length}beat: {share:.4f} of the wire's beats are the "
              f"DMA's (limit {limit:.4f} = {length}/{length + 1}, ratio {share / limit:.3f}; "
              f"{r['wire_beats']} beats for {PACKETS} packets)", flush=True)
        print(f"linklayer.cycles_per_packet.{length}beat: {per:.2f} cycles ({sim}, limit "
              f"{length + 1}, ratio {per / (length + 1):.3f})", flush=True)
    lp = LinkLayerParams()
    need = LinkLayerParams.round_trip_beats(LINK_LATENCY, *LINK_BANDWIDTH, lp.max_packet_beats)
    print(f"linklayer.replay_beats.ring: {need} beats for line rate on the ring's links "
          f"({LINK_LATENCY} cycles, {LINK_BANDWIDTH[0]}/{LINK_BANDWIDTH[1]} beats a cycle, "
          f"packets up to {lp.max_packet_beats}); the default holds {lp.replay_beats} "
          f"(ratio {need / lp.replay_beats:.2f})")
    for line in ring_campaign(sim):
        print(line, flush=True)
    if synth:
        from benchmarks.synth import resource_lines
        from linklayer.rtl import LinkRx, LinkTx
        for name, cls in (("tx", LinkTx), ("rx", LinkRx)):
            for line in resource_lines(f"linklayer.{name}", cls(T3Params(), lp),
                                       f"t3_link_{name}"):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-synth"] or None,
                  synth="--no-synth" not in sys.argv))
