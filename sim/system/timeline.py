"""``t3 run --timeline FILE``: what every GPU did over time, from counters sampled every few
hundred cycles over the configuration ports (``sim.system.testbench.TIMELINE_REGS``).

Per GPU and sampling interval:

* **GEMM stage** — the ring step whose output the GEMM is storing: ``stores / chunk beats``
  + 1 (each step stores one chunk); blank while the GEMM issues no request;
* **link busy** — the fraction of the link's capacity the DMA engine used (``link_busy``, or
  with headers that cost no bandwidth the payload's ``beats_sent``, over the interval x the
  link's beats per cycle): the RS steps;
* **MCQ, compute / communication** — the memory controller queue's entries by stream at the
  sample;
* **Tracker** — its valid entries at the sample;
* **GEMM stalled** — the fraction of the interval a compute request waited at the arbiter;
* **L2 read hit rate** (nodes with an L2) — the interval's read hits over its reads.

:func:`draw` shows each as a GPU x time heat map, the phases marked; a user sees the overlap,
and where it breaks, at a glance.
"""

import json
from pathlib import Path


__all__ = ["series", "draw", "write", "panels", "PANELS", "L2_PANEL"]


#: The panels: (key, title, colour map).
PANELS = (("stage", "GEMM stage (ring step being stored)", "viridis"),
          ("link", "link busy (fraction of capacity)", "magma"),
          ("mcq_compute", "MCQ entries: compute", "Blues"),
          ("mcq_comm", "MCQ entries: communication", "Oranges"),
          ("tracker", "Tracker entries", "Greens"),
          ("stalled", "GEMM stalled at the arbiter (fraction)", "Reds"))

#: The panel of runs whose nodes have an L2 (their samples hold ``l2.read_hits`` and
#: ``l2.read_misses``): the interval's read hits over its reads (blank without reads).
L2_PANEL = ("l2_hits", "L2 read hit rate", "cividis")


def panels(result):
    """The panels of ``result``'s timeline: :data:`PANELS`, and :data:`L2_PANEL` with an L2."""
    return PANELS + ((L2_PANEL,) if "l2.read_hits" in result["timeline"]["regs"] else ())


def series(result):
    """``{"cycles": [...], "phases": [(name, first, last)], key: [[per sample] per GPU]}``
    from a run's ``result["timeline"]``."""
    tl = result["timeline"]
    regs = tl["regs"]
    at = {name: i for i, name in enumerate(regs)}
    samples = tl["samples"]
    gpus = result["gpus"]
    chunk_beats = tl["chunk_beats"]
    link = tl["link"][0] / tl["link"][1]
    sent = "dma.link_busy" if tl.get("charge_headers", True) else "dma.beats_sent"
    out = {"cycles": [s["cycle"] for s in samples],
           "phases": [(name, a, b) for name, (a, b) in tl["spans"].items()]}
    l2 = "l2.read_hits" in at
    for key, _, _ in panels(result):
        out[key] = [[] for _ in range(gpus)]
    prev = None
    for s in samples:
        for g, values in enumerate(s["gpus"]):
            v = dict(zip(regs, values))
            busy = prev is not None and s["phase"] in ("gemm", "gemm_rs") and any(
                values[at[k]] != prev["gpus"][g][at[k]] for k in ("gpu.stores", "gpu.reads"))
            # blank (NaN) while the GEMM issues nothing: before its start, after its end
            out["stage"][g].append(min(gpus, v["gpu.stores"] // chunk_beats + 1) if busy
                                   else float("nan"))
            out["mcq_compute"][g].append(v["arbiter.compute_occupancy"])
            out["mcq_comm"][g].append(v["arbiter.occupancy"] - v["arbiter.compute_occupancy"])
            out["tracker"][g].append(v["tracker.occupancy"])
            if l2:
                hits, misses = v["l2.read_hits"], v["l2.read_misses"]
                if prev is not None:
                    p = dict(zip(regs, prev["gpus"][g]))
                    hits, misses = hits - p["l2.read_hits"], misses - p["l2.read_misses"]
                out["l2_hits"][g].append(hits / (hits + misses) if hits + misses
                                         else float("nan"))
            if prev is None:
                out["link"][g].append(0.0)
                out["stalled"][g].append(0.0)
            else:
                dt = max(1, s["cycle"] - prev["cycle"])
                p = prev["gpus"][g]
                out["link"][g].append(
                    (values[at[sent]] - p[at[sent]]) / (dt * link))
                out["stalled"][g].append(
                    (values[at["arbiter.compute_wait"]] - p[at["arbiter.compute_wait"]]) / dt)
        prev = s
    return out


def draw(result, path):
    """The heat maps into ``path`` (PNG, SVG or PDF by its suffix)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    data = series(result)
    cycles = data["cycles"]
    gpus = result["gpus"]
    shown = panels(result)
    fig, axes = plt.subplots(len(shown), 1, sharex=True,
                             figsize=(12, 1.2 + len(shown) * (0.6 + 0.12 * gpus)))
    extent = (cycles[0] if cycles else 0, cycles[-1] if cycles else 1, gpus - 0.5, -0.5)
    for ax, (key, title, cmap) in zip(axes, shown):
        image = ax.imshow(data[key] or [[0]], aspect="auto", interpolation="nearest",
                          cmap=cmap, extent=extent)
        fig.colorbar(image, ax=ax, pad=0.01)
        ax.set_title(title, fontsize="small", loc="left")
        ax.set_ylabel("GPU", fontsize="small")
        ax.set_yticks(range(gpus))
        ax.tick_params(labelsize="x-small")
        for name, first, last in data["phases"]:
            ax.axvline(first, color="white", linewidth=0.8)
            if ax is axes[0]:
                ax.text((first + last) / 2, -0.6, name, ha="center", va="bottom",
                        fontsize="x-small")
    axes[-1].set_xlabel("cycle")
    w = result["workload"]
    fig.suptitle(f"{w['name']}: {w['m']} x {w['n']} x {w['k']} {w['dtype']}, "
                 f"{result['config']}, {gpus} GPUs (sampled every "
                 f"{result['timeline']['period']} cycles)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write(result, path):
    """``path``: the picture when its suffix is .png, .svg or .pdf (the samples go beside it
    as ``path + ".json"``), the samples alone when it is .json."""
    path = Path(path)
    data = json.dumps({k: result[k] for k in ("config", "gpus", "workload", "timeline")})
    if path.suffix.lower() == ".json":
        path.write_text(data)
        return [path]
    draw(result, path)
    side = Path(str(path) + ".json")
    side.write_text(data)
    return [path, side]
