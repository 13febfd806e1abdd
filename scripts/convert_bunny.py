"""Convert the npm package bunny@1.0.1 (the Stanford bunny as JS arrays) into weftlib/sparse/data/bunny.npz.

Run once, by hand:  npm pack bunny@1.0.1 && tar xzf bunny-1.0.1.tgz
                    python scripts/convert_bunny.py package/index.js
The package's index.js is `exports.positions=[[x,y,z],...];exports.cells=[[i,j,k],...]` — plain JSON arrays,
so it is parsed as JSON (nothing is evaluated). Positions are stored as float32 (the source has 6 decimals),
faces as int32, compressed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "weftlib" / "sparse" / "data" / "bunny.npz"


def parse_index_js(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Pull the two JSON arrays out of the package's index.js."""
    arrays = {}
    for name in ("positions", "cells"):
        match = re.search(rf"exports\.{name}\s*=\s*(\[.*?\]\])", text, flags=re.S)
        if match is None:
            raise ValueError(f"index.js has no exports.{name} array")
        arrays[name] = json.loads(match.group(1))
    positions = np.asarray(arrays["positions"], dtype=np.float32)
    cells = np.asarray(arrays["cells"], dtype=np.int32)
    if positions.ndim != 2 or positions.shape[1] != 3 or cells.ndim != 2 or cells.shape[1] != 3:
        raise ValueError(f"unexpected shapes: positions {positions.shape}, cells {cells.shape}")
    if cells.min() < 0 or cells.max() >= len(positions):
        raise ValueError("face indices out of range")
    return positions, cells


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: convert_bunny.py PATH/TO/package/index.js")
    positions, cells = parse_index_js(Path(argv[0]).read_text())
    np.savez_compressed(OUT, vertices=positions, faces=cells)
    print(f"{OUT}: {len(positions)} vertices, {len(cells)} faces, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
