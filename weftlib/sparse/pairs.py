"""The kernel map as its existing (input, output) pairs, chunk by chunk: what the compact path multiplies.

On a surface about half of a neighbour table's entries are -1 (0.47 at the 1024 bunny), so multiplying every
tap wastes about half the FLOPs of a layer. A `Rulebook` keeps only the pairs that exist, laid out for
chunks of consecutive voxels: inside a chunk the pairs are offset-major, so each offset's input rows are
gathered into one contiguous operand of one GEMM, and for every voxel the positions of its products are
listed in voxel order, so summing them is one `embedding_bag` (a gather and a segment sum). The sum is a
gather, never a scatter-add: on this machine index_add_, index_copy_ and scatter_add_ measured about 27 ns
per 256-byte row, embedding_bag's whole chunk about 7.

It is built once per voxel set and reused by every layer at that resolution, as spconv reuses its rulebook
and MinkowskiEngine its kernel map; building it costs about half a layer (`benchmark.benchmark_against_limits`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .chunk_threads import run_chunks, workers_for

_INDEX = torch.int32  # voxel and pair positions; embedding_bag wants input and offsets in one dtype


@dataclass(frozen=True, eq=False)
class Rulebook:
    """The pairs of one neighbour table, in chunks of `chunk_rows` consecutive voxels.

    `sources[p]` is the input voxel of pair p (offset-major inside its chunk); `bags` lists, voxel by voxel,
    the positions of that voxel's pairs within its chunk and `bag_starts[i]` where voxel i's list starts
    (relative to its chunk); `tap_ends[c, o]` counts chunk c's pairs up to offset o; chunk c's pairs are
    `chunk_starts[c]:chunk_starts[c + 1]`. `table` is the neighbour table it came from.
    """

    table: torch.Tensor
    chunk_rows: int
    sources: torch.Tensor
    bags: torch.Tensor
    bag_starts: torch.Tensor
    tap_ends: torch.Tensor
    chunk_starts: tuple[int, ...]

    @property
    def pairs(self) -> int:
        return self.chunk_starts[-1]

    @property
    def max_chunk_pairs(self) -> int:
        return max((b - a for a, b in zip(self.chunk_starts, self.chunk_starts[1:])), default=0)

    @property
    def nbytes(self) -> int:
        """Bytes it holds beyond the table it refers to."""
        return sum(t.numel() * t.element_size() for t in (self.sources, self.bags, self.bag_starts, self.tap_ends))


def build(nbr: torch.Tensor, chunk_rows: int) -> Rulebook:
    """The rulebook of neighbour table `nbr` [N, k^3] (int64, -1 for no neighbour) in chunks of `chunk_rows`,
    the chunks built on every thread torch may use (`chunk_threads`)."""
    n, taps = nbr.shape
    if n >= torch.iinfo(_INDEX).max:
        raise ValueError(f"a rulebook indexes voxels as int32; {n} voxels is too many")
    count = -(-n // chunk_rows)
    built: list[tuple[torch.Tensor, ...]] = [()] * count

    def make_work() -> Callable[[int], None]:
        def work(c: int) -> None:
            built[c] = _chunk_pairs(nbr[c * chunk_rows : (c + 1) * chunk_rows])

        return work

    run_chunks(count, make_work)
    sources, bags, bag_starts, tap_ends = (list(parts) for parts in zip(*built)) if built else ([], [], [], [])
    starts = [0, *itertools.accumulate(len(b) for b in bags)]
    empty = torch.empty(0, dtype=_INDEX)
    return Rulebook(
        table=nbr,
        chunk_rows=chunk_rows,
        sources=torch.cat(sources) if sources else empty,
        bags=torch.cat(bags) if bags else empty,
        bag_starts=torch.cat(bag_starts) if bag_starts else empty,
        tap_ends=torch.stack(tap_ends) if tap_ends else torch.empty((0, taps), dtype=torch.int64),
        chunk_starts=tuple(starts),
    )


def _chunk_pairs(part: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One chunk's (sources, bags, bag_starts, tap_ends) from its rows of the table."""
    valid = part >= 0
    per_tap = valid.sum(0)
    ends = per_tap.cumsum(0)
    # position of pair (i, o) in the offset-major order: pairs before offset o, plus those of o above row i
    position = valid.cumsum(0, dtype=_INDEX).add_((ends - per_tap - 1).to(_INDEX))
    bag = position[valid]  # voxel-major: each voxel's products, in offset order
    source = torch.empty(len(bag), dtype=_INDEX)
    source[bag] = part[valid].to(_INDEX)
    per_row = valid.sum(1, dtype=_INDEX)
    return source, bag, per_row.cumsum(0, dtype=_INDEX).sub_(per_row), ends


def most_chunk_pairs(nbr: torch.Tensor, chunk_rows: int) -> int:
    """Pairs in the fullest chunk of `chunk_rows` voxels: what sizes `conv`'s two buffers (the memory model's)."""
    return max((int((nbr[s : s + chunk_rows] >= 0).sum()) for s in range(0, len(nbr), chunk_rows)), default=0)


def buffer_pairs(nbr: torch.Tensor, chunk_rows: int, threads: int | None = None) -> int:
    """Pairs `conv`'s gather and product buffers hold together: the fullest chunk's, once per thread it runs
    on (`chunk_threads.workers_for`): what sizes its buffers in the memory model."""
    return workers_for(-(-len(nbr) // chunk_rows), threads) * most_chunk_pairs(nbr, chunk_rows)


def conv(feats: torch.Tensor, book: Rulebook, weight: torch.Tensor) -> torch.Tensor:
    """Submanifold convolution over the rulebook's pairs; `weight` is [k^3, Cin, Cout], offset-major.

    Per chunk: one gather of the pairs' input rows into a reused buffer, one GEMM per offset on its
    contiguous rows (`_multiply`), one embedding_bag summing each voxel's products into its output
    rows. Chunks run on every thread torch may use (`chunk_threads`), each thread with its own buffers
    sized for the fullest chunk: the extra memory beyond the output (`buffer_pairs`, `memory.peak_model`).
    """
    n = feats.shape[0]
    out = feats.new_empty((n, weight.shape[2]))
    grouped = _groups(feats, weight)
    ends = book.tap_ends.to(torch.int32) if grouped else book.tap_ends.tolist()

    def make_work() -> Callable[[int], None]:
        most = book.max_chunk_pairs
        gathered = feats.new_empty((most, feats.shape[1]))
        products = None if grouped else feats.new_empty((most, weight.shape[2]))

        def work(c: int) -> None:
            start, (p0, p1) = c * book.chunk_rows, book.chunk_starts[c : c + 2]
            stop = min(n, start + book.chunk_rows)
            if p1 == p0:  # no voxel of this chunk has any neighbour, not even itself
                out[start:stop].zero_()
                return
            rows = torch.index_select(feats, 0, book.sources[p0:p1], out=gathered[: p1 - p0])
            made = _multiply(rows, weight, ends[c], products)
            out[start:stop] = F.embedding_bag(book.bags[p0:p1], made, book.bag_starts[start:stop], mode="sum")

        return work

    run_chunks(len(book.tap_ends), make_work)
    return out


def _groups(feats: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether `torch._grouped_mm` takes these operands on the CPU (torch 2.13): float32, float16 or bfloat16
    (float64 is refused), rows of both channel counts a multiple of 16 bytes (its stride rule)."""
    wide = all(c * feats.element_size() % 16 == 0 for c in weight.shape[1:])
    return wide and feats.dtype in (torch.float32, torch.float16, torch.bfloat16)


def _multiply(rows: torch.Tensor, weight: torch.Tensor, ends: Any, products: torch.Tensor | None) -> torch.Tensor:
    """Each offset's contiguous run of `rows` (offset o's ends at `ends[o]`) times `weight[o]`.

    One grouped GEMM for the chunk (`torch._grouped_mm`, `ends` an int32 tensor) where the operands allow:
    one call instead of k^3 (on the loaded VM the 27 calls cost 0.64 ms a chunk on tiny operands, the grouped
    one 0.29 ms); its products are a new tensor per chunk, one alive per thread at a time, as the reused
    buffer was. Otherwise one mm per offset into `products` (`ends` a list). The same rows times the same
    weights: equal to the bit on this machine's float32.
    """
    if products is None:
        return torch._grouped_mm(rows, weight, offs=ends)
    lo = 0
    for o, hi in enumerate(ends):
        if hi > lo:
            torch.mm(rows[lo:hi], weight[o], out=products[lo:hi])
        lo = hi
    return products[: len(rows)]
