#!/usr/bin/env python
"""Benchmark the neighborhood-attention formulations against natten on CPU (not a test: it takes minutes).

Writes <out>/benchmark.json (rows, speedups, machine) and <out>/benchmark.md, and prints a compact summary: each
time next to its lower bound (the compulsory bytes, q, k, v read once and the output written once, at this
machine's copy rate, or the FLOPs at the sgemm rate if longer; both rates measured right before and after the
row, the nearer kept) and whether the machine was quiet while it ran (`contended`). A row faster than its bound
stops the benchmark: such a bound is wrong. The default runs the acceptance
grid (32^2, 64^2, 128^2; kernel 7, 4 heads, dim 32) and NAF's 512^2 geometry (every formulation; the
full-resolution ones in torch only) with peak memory in capped subprocesses, e.g.:

    .venv/bin/python scripts/bench_attention.py --out outputs/bench --threads 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from weftlib.attention import benchmark, geometry
from weftlib.suite import provenance, record


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--out", type=Path, default=Path("outputs/bench"), help="folder for benchmark.json/benchmark.md/ONNX"
    )
    p.add_argument("--sizes", type=int, nargs="*", default=[32, 64, 128], help="square grid sizes")
    p.add_argument("--kernel", type=int, default=7)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument(
        "--naf",
        type=int,
        nargs=2,
        action="append",
        metavar=("SIZE", "LOW"),
        help="add a NAF geometry (queries SIZE^2, k/v LOW^2); default: 512 32",
    )
    p.add_argument("--no-naf", action="store_true", help="skip the NAF geometry")
    p.add_argument(
        "--naf-methods",
        nargs="+",
        default=["gather", "matmul", "shift", "lowres"],
        help="formulations timed at the NAF geometry (default: %(default)s)",
    )
    p.add_argument("--methods", nargs="*", default=None, help="formulations (default: all that apply)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--natten-repeats", type=int, default=2)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--cap-gib", type=float, default=16.0, help="address-space cap of each measuring child")
    p.add_argument("--natten-max-gib", type=float, default=8.0, help="skip natten above this dense-score size")
    return p.parse_args(argv)


SHOWN = ["geometry", "method", "backend", "seconds", "spread", "repeats", "bound_seconds", "bound_by", "over_bound"]
SHOWN += ["no_reuse_GB", "peak_bytes", "sgemm_gflops", "copy_gbps", "contended"]


def write(args: argparse.Namespace, rows: list[dict], ratios: list[dict]) -> None:
    payload = {
        "rows": rows,
        "speedups": ratios,
        "threads": args.threads,
        "machine": provenance.machine(),
        "versions": provenance.package_versions(),
    }
    (args.out / "benchmark.json").write_text(json.dumps(record.jsonable(payload), indent=2))
    (args.out / "benchmark.md").write_text(
        f"# Attention benchmark ({args.threads} threads)\n\n{_rates_line(rows)}\n\n"
        f"{benchmark.to_markdown(rows)}\n\n{benchmark.to_markdown(ratios)}\n"
    )


def _rates_line(rows: list[dict]) -> str:
    timed = [r for r in rows if r.get("contended") is not None]
    if not timed:
        return "no timed rows"
    sgemm, copy = ([r[k] for r in timed] for k in ("sgemm_gflops", "copy_gbps"))
    busy = sum(r["contended"] for r in timed)
    return (
        f"machine in this run: sgemm {min(sgemm):.0f}-{max(sgemm):.0f} GFLOP/s, copy {min(copy):.1f}-{max(copy):.1f} "
        f"GB/s (read + written); {busy} of {len(timed)} timed rows contended"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    geoms = geometry.grid(args.sizes, args.kernel, args.heads, args.dim)
    if not args.no_naf:
        geoms += [
            geometry.naf_geometry(size=s, low=lo, methods=args.naf_methods) for s, lo in (args.naf or [(512, 32)])
        ]
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for geom in geoms:  # the report is rewritten after each geometry: a long run keeps what it measured
        rows += benchmark.sweep(
            [geom],
            folder=args.out / "onnx",
            progress=True,
            methods=args.methods,
            repeats=args.repeats,
            natten_repeats=args.natten_repeats,
            threads=args.threads,
            memory=not args.no_memory,
            cap_bytes=int(args.cap_gib * 2**30),
            natten_max_bytes=int(args.natten_max_gib * 2**30),
        )
        write(args, rows, benchmark.speedups(rows))
        rows = benchmark.with_bounds(rows, geoms)  # a row faster than its bound stops the run here, rows written
    ratios = benchmark.speedups(rows)
    write(args, rows, ratios)
    print(_rates_line(rows))
    print("over_bound = median seconds / lower bound (compulsory bytes at the copy rate, or FLOPs at the sgemm rate)")
    print(benchmark.to_markdown([{k: r.get(k) for k in SHOWN} for r in rows if r["seconds"] is not None]))
    print(benchmark.to_markdown(ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
