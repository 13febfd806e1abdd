"""Forward time and peak memory of one submanifold convolution layer (default: the 1024 bunny, C=64, fp32,
2 threads, kernel map given), one fresh process per method (its first call the peak), next to this machine's limit measured in the
same run (sgemm GFLOP/s and copy GB/s) and spconv's time on the same voxels when spconv is installed.
The logic is `weftlib.sparse.benchmark.benchmark_against_limits`; this only parses flags and prints.

    .venv/bin/python scripts/bench_sparse.py                         # auto (given the rulebook) and chunked im2col
    .venv/bin/python scripts/bench_sparse.py --methods auto compact im2col accumulate --json out.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from weftlib import sparse
from weftlib.sparse import benchmark, footprint, summary, voxels
from weftlib.suite import provenance, record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="bunny", choices=voxels.SHAPES)
    parser.add_argument("--res", type=int, default=1024)
    parser.add_argument("--channels", type=int, default=64)
    choices = (sparse.AUTO, *tuple(m for m in sparse.METHODS if m != "dense"))
    parser.add_argument("--methods", nargs="+", default=[sparse.AUTO, "im2col"], choices=choices)
    parser.add_argument("--dtype", default="float32", choices=tuple(footprint.DTYPES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk-rows", type=int, default=4096, help="im2col rows per chunk (0: unchunked)")
    parser.add_argument("--spconv-threads", type=int, default=1, help="0 skips spconv")
    parser.add_argument("--json", type=Path, help="also write the full result here")
    args = parser.parse_args()
    result = benchmark.benchmark_against_limits(
        args.shape,
        args.res,
        args.channels,
        args.methods,
        args.dtype,
        args.threads,
        args.repeats,
        {"im2col": args.chunk_rows or None},
        args.spconv_threads,
        progress=False,
    )
    print(summary.format_benchmark(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(record.jsonable({**result, "machine": provenance.machine()}), indent=2))


if __name__ == "__main__":
    main()
