# amaranth: UnusedElaboratable=no
"""``t3 export``: a block's, the node's, the GPU's or the ring's Verilog and register map."""

import argparse
from pathlib import Path

from system.blocks import BLOCKS as NODE_BLOCKS
from system.ring import MAX_GPUS, TOPOLOGIES
from system.spec import FORMATS, MEMORY_ROWS
from t3.options import (charge_headers_arg, folder_arg, given, int_arg, param_args, param_fields,
                        system_args, system_params)


def add_parser(sub):
    """Add ``t3 export`` to the subcommands ``sub``."""
    export = sub.add_parser("export", help="write a block's Verilog")
    export_sub = export.add_subparsers(dest="block", required=True)
    for name, (top, add_args, _) in exportable().items():
        p = export_sub.add_parser(name, help=f"module {top}")
        p.add_argument("--out", required=True, metavar="DIR", type=folder_arg,
                       help="output folder (made if missing)")
        add_args(p)
        system_args(p)
        p.set_defaults(func=cmd_export)


def _block_args(block):
    """``t3 export``'s and ``t3 synth``'s options for ``block`` (a
    :class:`system.blocks.Block`): one per field of its parameters (:func:`param_fields`) and
    per field of its ``choices``, and the arbiter's ``--mcq-ram``."""
    def add(parser):
        prefix = block.option_prefix
        group = param_args(parser, f"{block.name} parameters", block.params,
                            param_fields(block.params), prefix)
        for name, values in block.choices:
            default = getattr(block.params(), name)
            group.add_argument(f"--{(prefix + name).replace('_', '-')}", dest=prefix + name,
                               choices=values, default=None,
                               help=f"one of {', '.join(values)} (default {default}; "
                                    f"{block.doc})")
        if block.name == "mc_arbiter":
            group.add_argument(
                "--mcq-ram", choices=("lut", "block"), default=None,
                help="where the MCQ's entries are kept, cycle for cycle the same: LUT RAM or "
                     "block RAM (default: LUT RAM up to 64 entries, block RAM above and on an "
                     "iCE40, which has no LUT RAM)")
    return add


def _block_build(block):
    """The constructor of ``block`` from its commands' options (:func:`_block_args`)."""
    def build(args):
        fields = given(args, param_fields(block.params) + tuple(n for n, _ in block.choices),
                        block.option_prefix)
        options = {}
        if block.name == "mc_arbiter":
            mcq_ram = args.mcq_ram
            if mcq_ram is None and getattr(args, "target", None) in ("hx8k", "up5k"):
                mcq_ram = "block"
            options["mcq_ram"] = mcq_ram
        return block.build(system_params(args), block.params(**fields), **options)
    return build


def _node_args(parser):
    g = parser.add_argument_group("GPU node")
    g.add_argument("--memory-rows", type=int_arg(1), default=MEMORY_ROWS,
                   help=f"HBM rows per bank (default {MEMORY_ROWS}: 128 KiB)")
    g.add_argument("--l2", action="store_true",
                   help="with the paper rings' L2 (128 sets x 16 ways of 32 bytes, 4 banks: "
                        "docs/l2.md)")


def _node_params(args):
    from system.spec import PAPER_L2, node_for
    return node_for(memory_rows=args.memory_rows, l2=PAPER_L2 if args.l2 else None)


def _node(args):
    from system.node import GPUNode
    return GPUNode(system_params(args), _node_params(args))


def _gpu(args):
    from system.gpu import GPU
    from system.spec import ENGINE_PARAMS
    return GPU(system_params(args), _node_params(args), ENGINE_PARAMS)


def _ring_args(parser):
    g = parser.add_argument_group("GPU node")
    g.add_argument("--memory-rows", type=int_arg(1), default=None,
                   help=f"HBM rows per bank (default {MEMORY_ROWS}, {2 * MEMORY_ROWS} for more "
                        f"than 8 GPUs: what t3 run uses)")
    g.add_argument("--formats", type=_formats_arg, default=FORMATS, metavar="T[,T...]",
                   help=f"the element types the near-bank ALUs and the engines' adders add "
                        f"(default {','.join(FORMATS)}; t3 run's ring: its workload's type)")
    g.add_argument("--link-layer", action="store_true",
                   help="the link layer between every DMA engine and its link (docs/linklayer.md)")
    g = parser.add_argument_group("ring")
    g.add_argument("--gpus", type=int_arg(2, MAX_GPUS), default=4,
                   help=f"GPUs, 2 to {MAX_GPUS} (default 4)")
    g.add_argument("--topology", choices=TOPOLOGIES, default="ring",
                   help="ring (default), or mesh: every GPU linked to every other")
    g.add_argument("--link-latency", type=int_arg(2), default=None,
                   help="link latency in cycles (default: the scaled system's)")
    g.add_argument("--link-bw", default=None, metavar="NUM/DEN",
                   help="link beats per cycle as a fraction (default: the scaled system's 3/80)")
    charge_headers_arg(g)
    g.add_argument("--engines", action="store_true",
                   help="the simulation top: every GPU with its traffic engine (t3 run's ring)")


def _formats_arg(text):
    """An argparse ``type``: comma-separated element types of the near-bank ALUs."""
    from hw.interfaces import ElemType
    known = [e.name.lower() for e in ElemType]
    formats = tuple(f for f in text.split(",") if f)
    if not formats or any(f not in known for f in formats) or len(set(formats)) != len(formats):
        raise argparse.ArgumentTypeError(f"distinct element types of {', '.join(known)}, "
                                         f"comma-separated, not {text!r}")
    return formats


def _link_bw(text):
    from system.spec import LINK_BANDWIDTH
    if text is None:
        return LINK_BANDWIDTH
    try:
        num, den = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--link-bw must be NUM/DEN (e.g. 3/80), not {text!r}") from None
    return num, den


def ring_spec(args):
    """The :class:`system.spec.RingSpec` of ``t3 export ring``'s and ``t3 synth``'s options."""
    from system.spec import LINK_LATENCY, ring_for
    return ring_for(args.gpus, engines=args.engines, memory_rows=args.memory_rows,
                    formats=args.formats, linklayer=args.link_layer or None,
                    topology=args.topology, bandwidth=_link_bw(args.link_bw),
                    latency=LINK_LATENCY if args.link_latency is None else args.link_latency,
                    charge_headers=args.charge_headers, params=system_params(args))


def _ring(args):
    return ring_spec(args).build()


def exportable():
    """``{name: (Verilog module name, argument adder, constructor from parsed arguments)}`` of
    what ``t3 export`` and ``t3 synth`` build: every block of the node's registry
    (:data:`system.blocks.BLOCKS`, as it is when the parser is built), the node, the GPU and
    the ring."""
    return {**{name: (block.top, _block_args(block), _block_build(block))
               for name, block in NODE_BLOCKS.items()},
            "node": ("t3_node", _node_args, _node),
            "gpu": ("t3_gpu", _node_args, _gpu),
            "ring": ("t3_ring", _ring_args, _ring)}


def cmd_export(args):
    from hw.export import write_verilog
    top_name, _, build = exportable()[args.block]
    component = build(args)
    path = write_verilog(component, top_name, args.out)
    print(f"wrote {path}")
    regs = getattr(component, "regs", None)
    if regs is not None:
        md = Path(args.out) / f"{top_name}_registers.md"
        md.write_text(f"# {top_name} registers\n\n32-bit words; see hw/csr.py for the bus "
                      f"timing.\n\n{regs.markdown()}\n")
        print(f"wrote {md}")
    return 0
