"""02's equality proof: every formulation against real natten on one geometry, the same inputs for all."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .calls import diff, natten_call, torch_call
from .geometry import Geometry, make_inputs, methods_for


def equality(geom: Geometry, methods: Iterable[str] | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """Max |formulation - natten| per formulation on one geometry (natten via its Flex backend)."""
    inputs = make_inputs(geom, seed)
    ref = natten_call(geom, inputs)()
    rows = []
    for method in methods or methods_for(geom):
        out = torch_call(geom, method, inputs)()
        rows.append(
            {
                "geometry": geom.name,
                "method": method,
                "size": list(geom.size),
                "kernel": geom.kernel,
                "dilation": geom.dilation,
                "dim": geom.dim,
                "v_dim": geom.v_dim,
                "max_abs_diff": diff(out, ref),
            }
        )
    return rows
