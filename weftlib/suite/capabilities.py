"""Which notebook can run fully on this machine, and what is missing for the parts that cannot: notebook 00
says so before anything long runs, so a partial run is never read as a full one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def by_notebook(
    env: dict[str, Any], appendix_ram_gib: float, notebooks: Sequence[str] | None = None
) -> list[dict[str, str]]:
    """Which notebook can run fully on this machine, and what is missing for the parts that cannot.

    `notebooks` (default: every notebook of `params/default.yaml`) is the list to judge, in order; the
    notebook list lives in the plan, only what each notebook needs is written here, and a notebook with no
    rule below is an error that names it.
    """
    from ..gate.compiler.dfc_target import image  # not at import: the gate package loads onnx
    from .params import notebook_names

    natten_native = env["natten"]["libnatten"] and env["natten"]["cuda"]
    dfc = env["hailo_dfc"]["importable"]
    ram_gib = env["machine"]["ram_bytes"] / 2**30
    needs = {
        "00_overview": (True, "full: reads this machine"),
        "01_trace_natten": (
            True,
            "full: the trace needs no CUDA; natten's own call fails on CPU as it would"
            + ("" if not natten_native else " (here it runs: libnatten + CUDA present)"),
        ),
        "02_export_attention": (
            True,
            "full: equality against natten's Flex backend, export and onnxruntime"
            + (" (plus natten's CUTLASS path)" if natten_native else ""),
        ),
        "03_sparse_conv_memory": (
            ram_gib >= appendix_ram_gib,
            f"{ram_gib:.0f} GiB RAM; the 1024 appendix run wants about {appendix_ram_gib:.0f} GiB",
        ),
        "04_export_dit_block": (
            True,
            "full: export, onnxruntime and the device gate run on CPU; the DFC's word on "
            "its graphs comes through notebook 05",
        ),
        "05_gate_pairing": (
            dfc,
            "device gate runs anywhere; the DFC parse "
            + ("runs here" if dfc else f"needs the {image()} Docker image (Linux x86-64)"),
        ),
        "06_device_cut": (
            dfc,
            "the cuts and their proof run anywhere; the DFC's word on each cut "
            + ("comes here" if dfc else f"needs the {image()} Docker image (Linux x86-64)"),
        ),
    }
    names = list(notebook_names() if notebooks is None else notebooks)
    unknown = [n for n in names if n not in needs]
    if unknown:
        raise ValueError(
            f"notebooks: no capability rule for {unknown}; say in provenance.capabilities what each needs to run fully"
        )
    return [{"notebook": n, "fully here": "yes" if needs[n][0] else "partly", "why": needs[n][1]} for n in names]
