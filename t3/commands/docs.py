"""``t3 docs``: the register tables and paper tables of ``docs/``, and the records' keys."""

def add_parser(sub):
    """Add ``t3 docs`` to the subcommands ``sub``."""
    docs = sub.add_parser("docs", help="regenerate the register tables in docs/ from the "
                                        "register definitions and the paper tables from "
                                        "docs/results/; report a record whose runs would "
                                        "not run the same today, naming what moved")
    docs.add_argument("--check", action="store_true",
                      help="only report stale pages (exit 1 if any, or if what a results "
                           "file's runs ran has moved)")
    docs.set_defaults(func=cmd_docs)


def cmd_docs(args):
    from sim.system import figures
    from t3.docs import refresh
    stale = refresh(write=not args.check) + figures.refresh(write=not args.check)
    for page in stale:
        print(f"{'stale' if args.check else 'updated'}: {page}")
    if not stale:
        print("every register table and paper figure in docs/ is current")
    progress = _key_progress()
    old = figures.stale_results(progress=progress)
    for line in old:
        print(f"stale: {line}")
    if not args.check and not old:
        for path in figures.restamp(progress=progress):
            print(f"stamped: {path} (what its runs ran is today's: the next check is quick)")
    return 1 if (args.check and stale) or old else 0


def _key_progress():
    """A ``progress(done, total)`` that shows a bar on standard error while the records' keys
    are computed (seconds when their digests are cached; the first check after a change of
    the hardware exports each ring once)."""
    import sys
    from tqdm import tqdm
    bars = {}

    def progress(done, total):
        bar = bars.get("bar")
        if bar is None or bar.total != total or bar.n >= total:
            if bar is not None:
                bar.close()
            bar = bars["bar"] = tqdm(total=total, desc="the records' digests to compute",
                                     file=sys.stderr, leave=False,
                                     mininterval=0.1 if sys.stderr.isatty() else 10)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()
    return progress
