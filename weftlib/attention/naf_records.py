"""What the export of a faithful NAF graph records beside it for `gate fix`'s proof (`gate.fix.recorded`): the
run the export's own check made (the inputs and onnxruntime's outputs of the written file) and the same builder's
graph at a reduced geometry. At NAF's 512² every onnxruntime run of the original is minutes, so notebook 05
proves a fix there once on this run and on random sets at the reduced geometry, instead of running the original
on three random sets at full size. Any NAF graph from `KEEP_RUN_FROM` output elements keeps the run alone (no
reduced graph): 06 holds its cut's chain to it instead of running the graph whole (`recorded.cut_reference`)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch import nn

from weftlib.gate.fix import recorded
from weftlib.onnx_core import export as onnx_export

from .swap import swap_natten

RECORD_FROM = 1 << 24  # output elements (NAF's upsampler at 512²: 2^28) from which a faithful graph records its run
"""Below it the full proof is cheaper than the record: at 02's CI size (32 x 192², 2^20) the reduced graphs' exports
added 10 s to 02 and saved 1 s in 05; at NAF's 512² a run of the original is a minute and the record saves two."""
KEEP_RUN_FROM = 1 << 22  # output elements from which any NAF graph keeps its export check's run (no reduced graph)
"""For 06 alone (`recorded.cut_reference`): the run stands in for the whole graph in its cut's proof. The appendix's
rewritten graphs (256 x 192², 2^23) ran whole there for seconds each (naf_device 15 CPU s), a fifth of that to keep;
at 02's CI size (2^20) a run is milliseconds and nothing is kept."""
INPUTS_FROM = "the inputs notebook 02 exported the graph on (its seeded NAF inputs)"


def keeper(folder: Path) -> Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], None]:
    """`export`'s `keep_run`: the run written to `folder/run.npz` (`recorded.write_run`), bound to the graph it
    records (`<stem>.onnx` beside the folder) and marked as the export check ran it (`export.KEPT_RUN_AS_WRITTEN`)."""

    def keep(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        graph = folder.with_suffix(".onnx")
        recorded.write_run(folder, inputs, outputs, graph, as_written=onnx_export.KEPT_RUN_AS_WRITTEN)

    return keep


def write_reduced(
    module: nn.Module,
    args: Sequence[torch.Tensor],
    folder: Path,
    *,
    method: str,
    input_names: list[str],
    output_names: list[str],
    builder: str,
    atol: float,
    identity: Mapping[str, str],
) -> None:
    """`module` (the builder's graph at the reduced geometry) exported with natten swapped for `method`, as the
    full graph was, to `folder/reduced.pb`, with `record.json` saying who built it and at which sizes. Where that
    export fails the whole record goes, with a warning: the full graph stands, and 05 proves it in full."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with swap_natten(method):
            report = onnx_export.export(
                module,
                tuple(args),
                folder / "reduced.onnx",
                input_names=input_names,
                output_names=output_names,
                atol=atol,
                identity=identity,  # the same builder's faithful graph, at the reduced geometry
            )
    except Exception as exc:  # any exporter failure: the record is an optimisation of 05's proof, never required
        shutil.rmtree(folder, ignore_errors=True)
        warnings.warn(
            f"{folder.name}: no record for the fix's proof ({onnx_export.first_error_line(exc)})", stacklevel=2
        )
        return
    os.replace(report.path, folder / recorded.REDUCED)
    manifest = {
        "builder": builder,
        "inputs_from": INPUTS_FROM,
        "reduced_inputs": {n: list(a.shape) for n, a in zip(input_names, args, strict=True)},
    }
    (folder / recorded.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


@contextmanager
def warnings_kept() -> Iterator[list[str]]:
    """The warnings the block raises, as their messages: a reduced graph exported in a forked worker
    (`weftlib.workers.map_forked`) carries them back, and the parent warns them again (`warn_again`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        messages: list[str] = []
        try:
            yield messages
        finally:
            messages += [str(w.message) for w in caught]


def warn_again(messages: Sequence[str]) -> None:
    """Warnings a worker caught (`warnings_kept`), raised here where the caller sees them."""
    for message in messages:
        warnings.warn(message, UserWarning, stacklevel=2)
