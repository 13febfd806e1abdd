"""Forward time and peak memory of one submanifold convolution layer (default: the 1024 bunny, C=64, fp32,
2 threads), each repeat in a fresh process. The logic is `weftlib.memory.benchmark`; this only parses flags.

    .venv/bin/python scripts/bench_sparse.py --methods im2col accumulate scatter --repeats 3
"""

from __future__ import annotations

import argparse
import json

from weftlib import memory, sparse, voxels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="bunny", choices=voxels.SHAPES)
    parser.add_argument("--res", type=int, default=1024)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--methods", nargs="+", default=list(sparse.SPARSE_METHODS), choices=sparse.SPARSE_METHODS)
    parser.add_argument("--dtype", default="float32", choices=tuple(memory.DTYPES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk-rows", type=int, default=4096, help="im2col rows per chunk")
    args = parser.parse_args()
    n = len(voxels.voxel_set(args.shape, args.res))
    for method in args.methods:
        result = memory.benchmark(args.shape, args.res, args.channels, method, args.dtype, args.threads,
                                  args.repeats, args.chunk_rows if method == "im2col" else None, n=n)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
