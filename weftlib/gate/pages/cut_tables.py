"""Notebook 06's tables: each cut's coverage, its device segments as the DFC's translate arguments, the
compile-stage risks, the DFC's verdicts on the cuts, the merge before and after, and the deployable cut of each
RFD graph, from the partitions `run.cutting` made and proved.

pandas is imported inside each function, as `gate` and the CLI start without it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..cut.merge import LINK
from ..cut.segments import HeldTo, Partition
from ..estimate.device_model import Calibration
from ..estimate.payoff import CutEstimate
from ..record.allowlist import DeviceOps
from ..run.cutting import CutVerdict
from ..run_graphs import graph_label

if TYPE_CHECKING:
    import pandas as pd


GRAPH_RUN = {HeldTo.FRESH: "fresh", HeldTo.RECORDED: "recorded", HeldTo.IDENTICAL: "none: the graph itself"}


def coverage_table(partitions: dict[Path, Partition], root: str | os.PathLike):
    """One row per graph: segments, the device's share of nodes, MACs and parameters, what crosses, the proof
    (the chain against the graph run whole: recorded beside it, or run fresh for the proof; or none run, the one
    segment being the graph itself: `Partition.held_to`)."""
    import pandas as pd

    rows = []
    for model, part in partitions.items():
        c = part.coverage
        rows.append(
            {
                "graph": graph_label(model, root),
                "segments": len(part.segments),
                "device segments": len(part.device_segments),
                "nodes on device": f"{c.nodes[0]} of {c.nodes[1]}",
                "MACs on device": c.share("macs"),
                "params on device": c.share("params"),
                "tensors in/out of the device": c.crossings,
                "MiB per inference": c.bytes_crossing / 2**20,
                "chain vs graph": part.max_abs_diff,
                "graph run": GRAPH_RUN[part.held_to] if part.held_to else "",  # what held the chain
                "proven": part.proven,
            }
        )
    return pd.DataFrame(rows)


def segment_table(partitions: dict[Path, Partition], root: str | os.PathLike):
    """One row per device segment: the DFC's translate arguments on the original graph, its largest layer and
    the end nodes the parser may absorb."""
    import pandas as pd

    rows = []
    for model, part in partitions.items():
        for s in part.device_segments:
            layer = s.largest_layer
            rows.append(
                {
                    "graph": graph_label(model, root),
                    "segment": s.index,
                    "nodes": len(s.nodes),
                    "start_node_names": ", ".join(s.start_node_names),
                    "end_node_names": ", ".join(s.end_node_names),
                    "net_input_shapes": s.net_input_shapes,
                    "largest layer": f"{layer['node']} {layer['weight_shape']} ({layer['params']:,} params)"
                    if layer
                    else "",
                    "end nodes the parser may absorb": ", ".join(s.end_risks),
                }
            )
    return pd.DataFrame(rows)


def compile_risks(partitions: dict[Path, Partition], ops: DeviceOps, root: str | os.PathLike):
    """Each graph's largest device layer beside the compile-stage figures of the public record: a layer at
    least as large as one the compiler needed several contexts for, or could not place, is a risk to check
    at compile time (the record is about DFC 5.4.0 mostly), never a parse verdict."""
    import pandas as pd

    figures = sorted(ops.compile_figures, key=lambda f: f["params"])
    rows = []
    for model, part in partitions.items():
        layers = [s.largest_layer for s in part.device_segments if s.largest_layer]
        if not layers:
            continue
        top = max(layers, key=lambda layer: layer["params"])
        beyond = [f for f in figures if f["params"] <= top["params"]]
        nearest = beyond[-1] if beyond else figures[0]
        rows.append(
            {
                "graph": graph_label(model, root),
                "largest device layer": f"{top['node']} {top['weight_shape']}",
                "params": top["params"],
                "nearest recorded layer": nearest["layer"] + ("" if beyond else " (larger than this one)"),
                "what the compiler did with it": f"{nearest['result']} (DFC {nearest['dfc']}, {nearest['source']})",
                "risk": "check at compile"
                if beyond and any(w in nearest["result"] for w in ("failed", "contexts"))
                else "none recorded at this size",
            }
        )
    return pd.DataFrame(rows)


def verdict_table(verdicts: Sequence[CutVerdict]) -> pd.DataFrame:
    """One row per device segment the DFC parsed as a cut: its verdict, the nodes it moved, why."""
    import pandas as pd

    return pd.DataFrame([vars(v) for v in verdicts], columns=["model", "segment", "dfc", "moved", "why"])


def merge_table(partitions: dict[Path, Partition], before: dict[Path, Partition], root: str | os.PathLike):
    """One row per graph: device segments, tensors and MiB crossing per inference, and the device's share of
    the MACs, before the merge (`run.cutting.before_merge`) and after it."""
    import pandas as pd

    rows = []
    for model, part in partitions.items():
        old, c, b = before[model], part.coverage, before[model].coverage
        rows.append(
            {
                "graph": graph_label(model, root),
                "device segments before": len(old.device_segments),
                "device segments after": len(part.device_segments),
                "tensors before": b.crossings,
                "tensors after": c.crossings,
                "MiB before": b.bytes_crossing / 2**20,
                "MiB after": c.bytes_crossing / 2**20,
                "MACs on device before": b.share("macs"),
                "MACs on device after": c.share("macs"),
            }
        )
    return pd.DataFrame(rows)


def deployable_table(
    partitions: dict[Path, Partition], questions: Mapping[str, Sequence[str]], named: Mapping[str, Path]
):
    """The deployable cut of each RFD graph, the faithful graph beside its exact variant: device graphs (each a
    compiled network), the tensors and bytes crossing per inference and their time at `merge.LINK`'s line
    rate beside the device MACs' time at its rated speed, and the device's share of the MACs."""
    import pandas as pd

    rows = []
    for question, stems in questions.items():
        for stem in (s for s in stems if s in named):
            c = partitions[named[stem]].coverage
            rows.append(
                {
                    "question": question,
                    "graph": stem,
                    "device graphs": len(partitions[named[stem]].device_segments),
                    "tensors in/out of the device": c.crossings,
                    "MiB per inference": c.bytes_crossing / 2**20,
                    f"ms on the link ({LINK.name})": 1e3 * LINK.seconds(c.bytes_crossing),
                    "ms of device MACs at the rated INT8 speed": 1e3 * c.macs[0] / LINK.macs_per_s,
                    "MACs on device": c.share("macs"),
                }
            )
    return pd.DataFrame(rows)


def _ms(seconds: float) -> float:
    return round(1e3 * seconds, 4)


def estimate_table(estimates: Mapping[Path, CutEstimate], root: str | os.PathLike, band: float):
    """One row per graph, in ms per inference: the host alone (measured here), the cut's host segments
    (measured), its device segments (estimated, with the band: x/÷ `band`), its transfers (estimated at the
    link's rate), the cut in all with its band, host alone over the cut, and whether the device pays off."""
    import pandas as pd

    rows = []
    for model, e in estimates.items():
        rows.append(
            {
                "graph": graph_label(model, root),
                "host alone, ms (measured)": _ms(e.host_only),
                "host segments, ms (measured)": _ms(e.host_segments),
                "device, ms (estimate)": _ms(e.device),
                f"device band (x/÷ {band:.2f}), ms": f"{_ms(e.device_low):.3g} to {_ms(e.device_high):.3g}",
                "transfers, ms (estimate)": _ms(e.transfer),
                "tensors crossing": e.transfers,
                "cut, ms (estimate)": _ms(e.total),
                "cut band, ms": f"{_ms(e.total_low):.3g} to {_ms(e.total_high):.3g}",
                "host alone / cut": round(e.ratio, 3),
                "device pays off": str(e.verdict),
                "outside the zoo's range": "; ".join(e.outside),
            }
        )
    return pd.DataFrame(rows)


def calibration_table(calibration: Calibration):
    """One row per candidate fit: its terms, its held-out error (each family predicted by the others: median
    and 90th percentile of |log(predicted / published)|), the band that gives, and which one was chosen."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "fit of log FPS on the logs of": name,
                "held-out median |log error|": round(e.median, 3),
                "held-out 90th percentile": round(e.p90, 3),
                "band (x/÷)": round(e.band, 2),
                "networks": len(e.errors),
                "families": e.families,
                "chosen": name == calibration.chosen,
            }
            for name, e in calibration.candidates.items()
        ]
    )
