"""Every timing endpoint of a placed and routed design, from nextpnr's SDF: not one path.

nextpnr reports the worst path of each clock, so a design that misses its clock shows one
family of paths per placement, and a change that shortens that family only shows the next.
:func:`analyse` reads the delays nextpnr writes with ``--sdf`` (every cell arc and every routed
connection, the largest of each min:typ:max triple, as nextpnr's own setup analysis takes
them) and finds the latest arrival at every register input from every register output (one
clock, the one asked: the designs here have one), so that it can say how many endpoints miss
the clock, by how much in all (TNS), and which *families* of paths they belong to: the
register the worst path to each endpoint starts from and the register it ends at, by name
with bit indices and the tools' suffixes taken off (``tracker.s2_pairs5`` ->
``tracker.s3_write.M``).  ``t3 synth`` prints them (``hw.pnr.PnrResult.family_lines``);
``docs/fpga.md`` reads placements by them.

The worst slack found is nextpnr's own (``tests/test_pnr.py`` checks it against the reported
Fmax on a placed design).
"""

import collections
import dataclasses
import re


__all__ = ["Timing", "Family", "analyse", "group_of"]


_TRIPLE = r"\((-?[\d.]*):(-?[\d.]*):(-?[\d.]*)\)"
_INST = re.compile(r"\(INSTANCE\s*(.*?)\)\s*$")
_IOPATH = re.compile(r"\(IOPATH (\S+) (\S+) " + _TRIPLE + r" " + _TRIPLE)
_SETUP = re.compile(r"\(SETUPHOLD \((?:posedge|negedge) (\S+)\) \((?:posedge|negedge) (\S+)\) "
                    + _TRIPLE + r" " + _TRIPLE)
_INTER = re.compile(r"\(INTERCONNECT (\S+) (\S+) " + _TRIPLE + r" " + _TRIPLE)
#: cell ports that are clocks: an arc from one starts a path (and, in any cell, the clock
#: of one of its setup checks)
_CLOCKS = {"CLK", "CLKA", "CLKB"}
#: what the tools add to a register's or a cell's name
_SUFFIX = re.compile(r"(_TRELLIS_FF_Q|_DP16KD|_MULT18X18D|_LUT4|_CCU2C|_PFUMX|_L6MUX21|"
                     r"_TRELLIS_RAMW|_DPR16X4|_DO[AB]\d+|_SB_DFF|_SB_LUT4|_SB_CARRY|\$).*$")


@dataclasses.dataclass
class Family:
    """The endpoints whose worst path starts at register group ``start`` and ends at register
    group ``end`` (``.port``): the worst slack among them (ns), how many fail, how many are
    within the margin asked, and the worst one's path as ``(cell, wire ns, logic ns)`` steps
    (a carry chain one step)."""
    start: str
    end: str
    slack_ns: float
    failing: int
    near: int
    path: list

    def line(self):
        wires = sum(w for _, w, _ in self.path)
        total = wires + sum(lg for _, _, lg in self.path)
        return (f"{self.slack_ns:+.2f} ns  {self.failing} failing of {self.near}: {self.start} "
                f"-> {self.end} ({total:.2f} ns, {wires:.2f} of it wires, "
                f"{len(self.path) - 1} steps)")


@dataclasses.dataclass
class Timing:
    """The endpoints against a clock of ``period_ns``: how many, how many fail, the total of
    their negative slacks (``tns_ns``, ns), the worst slack, a histogram (``{upper bound in
    ns: endpoints}``, from the lowest bin) and the families of the endpoints within
    ``margin_ns`` of failing, worst first."""
    period_ns: float
    endpoints: int
    failing: int
    tns_ns: float
    worst_ns: float
    histogram: dict
    families: list

    @property
    def fmax_mhz(self):
        return 1000.0 / (self.period_ns - self.worst_ns)


def _unescape(name):
    return name.replace("\\", "")


def _pin(text):
    cut = text.rindex("/")
    return _unescape(text[:cut]), text[cut + 1:]


def _delay(match):
    """The largest of the rise and fall triples' maxima (groups 3-5 and 6-8)."""
    return max(float(match[5] or 0), float(match[8] or 0))


def _parse(lines):
    arcs = collections.defaultdict(list)     # pin -> [(pin, ps, is wire)]
    starts, setups = {}, {}
    cell_arcs = collections.defaultdict(list)  # instance -> [(from, to, ps)]
    clocks = collections.defaultdict(set)       # instance -> its setup checks' clocks
    inst = None
    for line in lines:
        if "INTERCONNECT" in line:
            m = _INTER.search(line)
            arcs[_pin(m[1])].append((_pin(m[2]), _delay(m), True))
        elif "IOPATH" in line:
            m = _IOPATH.search(line)
            cell_arcs[inst].append((m[1], m[2], _delay(m)))
        elif "SETUPHOLD" in line:
            m = _SETUP.search(line)
            key = (inst, m[1])
            setups[key] = max(setups.get(key, float("-inf")), float(m[5] or 0))
            clocks[inst].add(m[2])
        elif "INSTANCE" in line:
            inst = _unescape(_INST.search(line)[1].strip())
    for inst, cell in cell_arcs.items():
        for src, dst, delay in cell:
            if src in _CLOCKS or src in clocks[inst]:
                starts[(inst, dst)] = max(starts.get((inst, dst), 0.0), delay)
            else:
                arcs[(inst, src)].append(((inst, dst), delay, False))
    return arcs, starts, setups


def _arrivals(arcs, starts):
    """The latest arrival (ps) at every pin reached from a clocked output, and the arc it came
    by, in topological order (the routed design has no combinational loop)."""
    indegree = collections.Counter()
    seen, stack = set(starts), list(starts)
    while stack:
        pin = stack.pop()
        for nxt, _, _ in arcs.get(pin, ()):
            indegree[nxt] += 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    arrival, came = dict(starts), {}
    ready = [pin for pin in starts if indegree[pin] == 0]
    while ready:
        pin = ready.pop()
        t = arrival[pin]
        for nxt, delay, wire in arcs.get(pin, ()):
            if t + delay > arrival.get(nxt, float("-inf")):
                arrival[nxt] = t + delay
                came[nxt] = (pin, delay, wire)
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    return arrival, came


def group_of(cell):
    """A cell's register group: its name without the tools' suffixes and bit indices."""
    group = _SUFFIX.sub("", cell)
    group = re.sub(r"\[\d+\]", "[]", group)
    return re.sub(r"(\.\d+)+$", "", group)


def _steps(came, starts, pin):
    """The path to ``pin``: ``[(cell, wire ns into it, logic ns in it)]``, a carry chain's
    cells one step."""
    arcs = []
    while pin in came:
        prev, delay, wire = came[pin]
        arcs.append((pin[0], delay, wire))
        pin = prev
    arcs.append((pin[0], starts.get(pin, 0.0), False))
    steps = []
    for cell, delay, wire in reversed(arcs):
        key = re.sub(r"(_CIN_CCU2C_COUT)+", "", cell).replace("$CCU2_COMB0", "").replace(
            "$CCU2_COMB1", "")
        if steps and steps[-1][0] == key and (not wire or "CCU2C" in cell):
            c, w, lg = steps[-1]
            steps[-1] = (c, w + (delay if wire else 0), lg + (0 if wire else delay))
        else:
            steps.append((key, delay if wire else 0.0, 0.0 if wire else delay))
    return [(c, round(w / 1000, 3), round(lg / 1000, 3)) for c, w, lg in steps]


#: the histogram's upper bounds (ns of slack)
BINS = (-2.0, -1.5, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0)


def analyse(sdf_lines, period_ns, margin_ns=0.25, families=20):
    """The endpoints of the design whose SDF is ``sdf_lines`` (an iterable of its lines)
    against ``period_ns``: a :class:`Timing` with the ``families`` worst :class:`Family`\\ s
    of the endpoints within ``margin_ns`` of failing."""
    arcs, starts, setups = _parse(sdf_lines)
    arrival, came = _arrivals(arcs, starts)
    period = period_ns * 1000
    slacks = sorted((period - setup - arrival[pin], pin) for pin, setup in setups.items()
                    if pin in arrival)
    if not slacks:
        raise ValueError("the SDF has no path between registers")
    failing = [s for s, _ in slacks if s < 0]
    histogram = dict.fromkeys(BINS, 0)
    for s, _ in slacks:
        for bound in BINS:
            if s / 1000 < bound:
                histogram[bound] += 1
                break
    groups = {}
    for s, pin in slacks:
        if s >= margin_ns * 1000:
            break
        first = pin
        while first in came:
            first = came[first][0]
        key = (group_of(first[0]), f"{group_of(pin[0])}.{re.sub(r'[0-9]+$', '', pin[1])}")
        if key not in groups:
            groups[key] = Family(key[0], key[1], round(s / 1000, 3), 0, 0,
                                 _steps(came, starts, pin))
        groups[key].near += 1
        groups[key].failing += s < 0
    return Timing(period_ns, len(slacks), len(failing), round(sum(failing) / 1000, 3),
                  round(slacks[0][0] / 1000, 3), histogram,
                  sorted(groups.values(), key=lambda f: f.slack_ns)[:families])
