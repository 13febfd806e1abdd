"""weftlib.attention against real natten: equality grid, natten's refusals, swap_natten, ONNX op sets.

natten on CPU runs its Flex backend (about a second per call here), so the grid is a hand-picked sample
that covers every axis of variation (kernel 3-13 incl. even and per-axis, dilation 1-4 incl. per-axis,
square and rectangular sizes that are not multiples of the dilation, 1 and 4 heads, GQA, head dims 8-32
incl. non powers of two, v dim != q dim, batch 2) with one natten call per case, shared by every method.
"""

from __future__ import annotations

import sys
import types
import warnings
from functools import cache

import natten
import natten.functional
import onnx
import pytest
import torch

from weftlib import attention
from weftlib.attention import index_math
from weftlib.gate import load_device_ops
from weftlib.onnx_core.walk import STANDARD_DOMAINS

TOL = 1e-5
FULL_RES = ("masked", "gather", "matmul", "shift")

# (H, W, kernel, dilation, heads, kv_heads, D, Dv)
GRID = {
    "k3-d1-square": (9, 9, 3, 1, 1, 1, 8, 8),
    "k3-d3-rect": (13, 10, 3, 3, 4, 4, 16, 24),
    "k5-d2-odd": (17, 17, 5, 2, 4, 4, 32, 64),
    "k4-even-d2": (14, 19, 4, 2, 1, 1, 16, 16),
    "k7-d32-peraxis": (23, 15, 7, (3, 2), 4, 4, 8, 40),
    "k95-d3-dim24": (30, 29, (9, 5), 3, 1, 1, 24, 32),
    "k13-d2": (27, 26, 13, 2, 4, 4, 8, 12),
    "k13x3-d4": (55, 13, (13, 3), 4, 1, 1, 8, 8),
    "k12x6-d24": (25, 26, (12, 6), (2, 4), 1, 1, 8, 16),
    "k10-full-axis": (10, 21, 10, (1, 2), 2, 2, 8, 8),
    "k11-whole-map": (11, 11, 11, 1, 1, 1, 8, 16),
    "gqa-4q-2kv": (12, 13, 5, 2, 4, 2, 16, 16),
}
# (h, w, dilation, kernel, heads, D, Dv): k/v on the low-res grid, queries on (h*dh, w*dw)
LOWRES = {
    "lowres-d32": (5, 7, (3, 2), (3, 4), 4, 16, 48),
    "lowres-d4": (8, 8, 4, 7, 1, 8, 24),
    "lowres-d1": (9, 10, 1, 3, 2, 8, 8),
}


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@cache
def _case(name: str):
    h, w, kernel, dilation, heads, kv, d, dv = GRID[name]
    q, k, v = _randn(2, h, w, heads, d, seed=1), _randn(2, h, w, kv, d, seed=2), _randn(2, h, w, kv, dv, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = attention.natten_reference(q, k, v, kernel, dilation)
    return (q, k, v, kernel, dilation), ref


@cache
def _lowres_case(name: str):
    h, w, dilation, kernel, heads, d, dv = LOWRES[name]
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    q = _randn(2, h * dh, w * dw, heads, d, seed=4)
    k, v = _randn(2, h, w, heads, d, seed=5), _randn(2, h, w, heads, dv, seed=6)
    up_k, up_v = attention.upsample_nearest(k, dilation), attention.upsample_nearest(v, dilation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = attention.natten_reference(q, up_k, up_v, kernel, dilation)
    return (q, k, v, up_k, up_v, kernel, dilation), ref


# ------------------------------------------------------------------------------------------- equality


@pytest.mark.parametrize("method", FULL_RES)
@pytest.mark.parametrize("name", sorted(GRID))
def test_formulation_equals_natten(name: str, method: str) -> None:
    (q, k, v, kernel, dilation), ref = _case(name)
    out = attention.na2d(q, k, v, kernel, dilation, method=method)
    assert out.shape == ref.shape
    err = (out - ref).abs().max().item()
    assert err <= TOL, f"{method} differs from natten by {err:.3g} on {name}"


@pytest.mark.parametrize("method", (*FULL_RES, "lowres"))
@pytest.mark.parametrize("name", sorted(LOWRES))
def test_lowres_equals_natten_on_upsampled_kv(name: str, method: str) -> None:
    (q, k, v, up_k, up_v, kernel, dilation), ref = _lowres_case(name)
    args = (k, v) if method == "lowres" else (up_k, up_v)
    err = (attention.na2d(q, *args, kernel, dilation, method=method) - ref).abs().max().item()
    assert err <= TOL, f"{method} differs from natten by {err:.3g} on {name}"


def test_explicit_scale_is_used() -> None:
    (q, k, v, kernel, dilation), _ = _case("k3-d1-square")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = attention.natten_reference(q, k, v, kernel, dilation, scale=0.7)
    default = attention.na2d(q, k, v, kernel, dilation)
    out = attention.na2d(q, k, v, kernel, dilation, scale=0.7)
    assert (out - ref).abs().max().item() <= TOL
    assert (default - out).abs().max().item() > 1e-2  # the scale really changes the result


def test_index_table_is_natten_rule_by_hand() -> None:
    # size 7, kernel 3, dilation 2: groups {0,2,4,6} (4 long) and {1,3,5} (3 long), windows clamped inward
    assert index_math.axis_table(7, 3, 2) == (
        (0, 2, 4),
        (1, 3, 5),
        (0, 2, 4),
        (1, 3, 5),
        (2, 4, 6),
        (1, 3, 5),
        (2, 4, 6),
    )
    # even kernel 4: left 2, right 1
    assert index_math.axis_table(6, 4, 1)[3] == (1, 2, 3, 4)


def test_halo_tiles_hold_every_neighbor_exactly_once() -> None:
    for size, kernel, dil in ((13, 3, 3), (29, 5, 3), (40, 4, 1), (20, 7, 2)):
        padded, n_tiles, _span, keys, allowed = index_math.halo_tiles(size, kernel, dil)
        table = index_math.axis_table(size, kernel, dil)
        tile = allowed.shape[2]
        assert padded == dil * n_tiles * tile >= size
        for i, row in enumerate(table):
            g, p = i % dil, i // dil
            picked = keys[g, p // tile][allowed[g, p // tile, p % tile]]
            assert sorted(picked.tolist()) == list(row), (size, kernel, dil, i)


def test_onehot_tiles_select_the_table() -> None:
    for size, kernel, dil in ((13, 3, 3), (29, 5, 3), (40, 4, 1)):
        starts, span, onehot = index_math.onehot_tiles(size, kernel, dil)
        onehot = torch.from_numpy(onehot)
        x = torch.arange(size, dtype=torch.float32)
        tiles = torch.stack([x[s : s + span] for s in starts])
        picked = (onehot @ tiles[..., None]).reshape(-1, kernel)[:size]
        assert picked.tolist() == [list(map(float, row)) for row in index_math.axis_table(size, kernel, dil)]


# ------------------------------------------------------------------------------------------- refusals


def _qkv(h: int = 9, w: int = 10, heads: int = 2, kv: int = 2, d: int = 8, dv: int = 8):
    return _randn(1, h, w, heads, d, seed=7), _randn(1, h, w, kv, d, seed=8), _randn(1, h, w, kv, dv, seed=9)


REFUSALS = {
    "kernel 1": (_qkv, {"kernel_size": 1}, "kernel_size"),
    "kernel 3-tuple": (_qkv, {"kernel_size": (3, 3, 3)}, "kernel_size"),
    "kernel float": (_qkv, {"kernel_size": 3.0}, "kernel_size"),
    "dilation 0": (_qkv, {"kernel_size": 3, "dilation": 0}, "dilation"),
    "dilation 3-tuple": (_qkv, {"kernel_size": 3, "dilation": (1, 1, 1)}, "dilation"),
    "kernel x dilation > size": (_qkv, {"kernel_size": 5, "dilation": 2}, "kernel_size"),
    "qk head dims": (lambda: (_qkv()[0], _randn(1, 9, 10, 2, 16, seed=1), _qkv()[2]), {"kernel_size": 3}, "head dims"),
    "batch": (lambda: (_qkv()[0], *(t.repeat(2, 1, 1, 1, 1) for t in _qkv()[1:])), {"kernel_size": 3}, "batch"),
    "layout": (lambda: (_qkv()[0], *_qkv(h=10)[1:]), {"kernel_size": 3}, "token layout"),
    "kv heads": (lambda: _qkv(heads=3, kv=2), {"kernel_size": 3}, "heads"),
    "dtype": (lambda: (_qkv()[0], _qkv()[1].double(), _qkv()[2]), {"kernel_size": 3}, "dtype"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refuses_where_natten_refuses(case: str) -> None:
    make, kwargs, word = REFUSALS[case]
    q, k, v = make()
    with pytest.raises(ValueError):
        natten.functional.na2d(q, k, v, **kwargs)
    for method in FULL_RES:
        with pytest.raises(ValueError, match=word):
            attention.na2d(q, k, v, method=method, **kwargs)


def test_refuses_own_limits() -> None:
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="method"):
        attention.na2d(q, k, v, 3, method="dense")
    with pytest.raises(ValueError, match="5-D"):
        attention.na2d(q[0], k[0], v[0], 3)
    big = _randn(1, 100, 120, 1, 8, seed=0)  # 12000 tokens: 1.4e8 dense scores
    with pytest.raises(ValueError, match="masked"):
        attention.na2d(big, big, big, 3, method="masked")
    lq, lk, lv = _randn(1, 15, 14, 2, 8, seed=0), _randn(1, 5, 7, 2, 8, seed=1), _randn(1, 5, 7, 2, 8, seed=2)
    attention.na2d(lq, lk, lv, 3, (3, 2), method="lowres")  # the exact case runs
    with pytest.raises(ValueError, match="lowres"):
        attention.na2d(lq, lk, lv, 3, 2, method="lowres")  # ratio (3, 2) != dilation 2


# ------------------------------------------------------------------------------------------------ swap


def _from_import_module() -> types.ModuleType:
    """A module that did `from natten import na2d` before any swap (the case rebinding natten misses)."""
    module = types.ModuleType("_weftlib_test_from_import")
    exec("from natten import na2d\ndef run(q, k, v):\n    return na2d(q, k, v, 5, 1, 2)\n", module.__dict__)
    sys.modules[module.__name__] = module
    return module


def test_swap_reroutes_and_restores() -> None:
    module = _from_import_module()
    original = natten.functional.na2d
    (q, k, v, kernel, dilation), ref = _case("k5-d2-odd")
    assert (kernel, dilation) == (5, 2)
    try:
        with attention.swap_natten("gather"):
            assert natten.na2d is not original and natten.functional.na2d is not original
            assert module.na2d is natten.na2d
            out = module.run(q, k, v)  # positional like natten: stride=1, dilation=2
            kw = natten.na2d(
                q,
                k,
                v,
                kernel_size=5,
                stride=(1, 1),
                dilation=2,
                is_causal=False,
                backend="cutlass-fna",
                torch_compile=False,
            )
        assert natten.na2d is original and natten.functional.na2d is original and module.na2d is original
        assert (out - ref).abs().max().item() <= TOL and (kw - ref).abs().max().item() <= TOL
    finally:
        del sys.modules[module.__name__]


def test_swap_restores_on_error_and_refuses_unsupported() -> None:
    original = natten.functional.na2d
    q, k, v = _qkv()
    with pytest.raises(RuntimeError, match="boom"), attention.swap_natten("shift"):
        raise RuntimeError("boom")
    assert natten.na2d is original and natten.functional.na2d is original
    with attention.swap_natten("shift"):
        with pytest.raises(ValueError, match="stride"):
            natten.na2d(q, k, v, 3, stride=2)
        with pytest.raises(ValueError, match="is_causal"):
            natten.na2d(q, k, v, 3, is_causal=(False, True))
        with pytest.raises(ValueError, match="return_lse"):
            natten.na2d(q, k, v, 3, return_lse=True)
        with pytest.raises(ValueError, match="kernel_size"):
            natten.na2d(q, k, v, 1)
    assert natten.na2d is original
    with pytest.raises(ValueError, match="method"), attention.swap_natten("flex"):
        pass


def test_rebound_na2d_puts_every_holder_back_after_an_error() -> None:
    module = _from_import_module()
    original = natten.functional.na2d

    def replacement(*args: object, **kwargs: object) -> None:
        raise AssertionError("not called")

    try:
        with pytest.raises(RuntimeError, match="boom"), attention.rebound_na2d(replacement):
            assert natten.na2d is replacement and natten.functional.na2d is replacement
            assert module.na2d is replacement
            raise RuntimeError("boom")
        assert natten.na2d is original and natten.functional.na2d is original and module.na2d is original
    finally:
        del sys.modules[module.__name__]


def test_swap_lowres_takes_the_low_grid_of_upsampled_kv() -> None:
    (q, _k, _v, up_k, up_v, kernel, dilation), ref = _lowres_case("lowres-d32")
    with attention.swap_natten("lowres"):
        out = natten.na2d(q, up_k, up_v, kernel, dilation=dilation)
        with pytest.raises(ValueError, match="nearest-upsampled"):
            natten.na2d(q, up_k + _randn(*up_k.shape, seed=0), up_v, kernel, dilation=dilation)
    assert (out - ref).abs().max().item() <= TOL


# ------------------------------------------------------------------------------------------------ ONNX

# The ops the device cannot take, from the allowlist (params/device_ops.yaml), not a copy of it.
FORBIDDEN = load_device_ops().blockers


def _export_inputs(method: str) -> tuple[torch.Tensor, ...]:
    q, k, v = _qkv(h=20, w=9, d=8, dv=16)  # 20 rows at dilation 2: 'gather' pads its query tiles
    return (q, k[:, ::2, ::3], v[:, ::2, ::3]) if method == "lowres" else (q, k, v)


def _check_op_set(model: onnx.ModelProto, method: str, folded: bool = True) -> None:
    """The Acceptance rules: standard domain, no known blocker, constant Gather indices, per-method bans.

    The legacy exporter leaves constant shape math unfolded (the gather method's padding goes through a
    `Cast`), so the blockers are checked on folded graphs, the ones the suite writes (`folded=True`).
    """
    nodes = list(model.graph.node)
    ops = {n.op_type for n in nodes}
    assert all(n.domain in STANDARD_DOMAINS for n in nodes), {n.domain for n in nodes}
    if folded:
        assert not ops & FORBIDDEN, ops
    constants = {i.name for i in model.graph.initializer}
    constants |= {o for n in nodes if n.op_type == "Constant" for o in n.output}
    assert all(n.input[1] in constants for n in nodes if n.op_type == "Gather"), "a Gather index is computed"
    if method in ("matmul", "shift", "lowres"):
        assert not ops & {"Gather", "GatherND", "GatherElements"}, ops
    if method == "shift":
        assert not ops & {"MatMul", "Gemm", "Einsum"}, ops
    if method == "gather":
        assert sum(n.op_type == "Gather" for n in nodes) == 2, ops


@pytest.mark.parametrize("method", attention.METHODS)
def test_exports_with_static_standard_ops(method: str) -> None:
    """Legacy exporter (fast, self-contained file in memory), checked, run in onnxruntime vs torch."""
    import io

    import onnxruntime

    inputs = _export_inputs(method)
    module = attention.NA2d((3, 2), (2, 3), method=method)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            inputs,
            buffer,
            dynamo=False,
            opset_version=17,
            do_constant_folding=True,
            input_names=["q", "k", "v"],
            output_names=["out"],
        )
    model = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version <= 10
    _check_op_set(model, method, folded=False)
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {n: t.numpy() for n, t in zip(("q", "k", "v"), inputs)})
    assert abs(torch.from_numpy(got) - module(*inputs)).max().item() <= TOL


@pytest.mark.parametrize("method", attention.METHODS)
def test_exports_through_weftlib_onnx_export(method: str, tmp_path) -> None:
    """The path notebook 02 uses (dynamo exporter, folded, IR <= 10): no known blocker in any method."""
    from weftlib.onnx_core import export as onnx_export

    report = onnx_export.export(
        attention.NA2d((3, 2), (2, 3), method=method),
        _export_inputs(method),
        tmp_path / f"{method}.onnx",
        input_names=["q", "k", "v"],
        output_names=["out"],
    )
    assert report.parity_ok and report.max_abs_diff <= TOL, report.max_abs_diff
    assert report.ir_version <= 10 and not report.plumbing and not report.dynamic_gathers
    _check_op_set(onnx.load(str(report.path)), method)


# ------------------------------------------------------------------------------------------- bands


@pytest.mark.parametrize("budget", [1, 5_000, 60_000])
@pytest.mark.parametrize("method", ("gather", "matmul", "shift"))
@pytest.mark.parametrize("name", ["k3-d3-rect", "k7-d32-peraxis", "k13x3-d4", "gqa-4q-2kv"])
def test_eager_bands_equal_natten_at_every_band_size(name: str, method: str, budget: int, monkeypatch) -> None:
    """A tiny band budget forces the banded eager paths (one query row / one column group per band) and
    puts band edges everywhere, also where natten's clamped windows shift inward at the borders."""
    from weftlib.attention import formulations

    monkeypatch.setattr(formulations, "BAND_BYTES", budget)
    (q, k, v, kernel, dilation), ref = _case(name)
    err = (attention.na2d(q, k, v, kernel, dilation, method=method) - ref).abs().max().item()
    assert err <= TOL, f"banded {method} differs from natten by {err:.3g} on {name} (budget {budget})"


@cache
def _whole_map_matmul(name: str) -> torch.Tensor:
    """The matmul formulation of a grid case at the default band budget (the whole map): the form traced for
    export, computed once a case for the six tile and budget settings compared with it."""
    (q, k, v, kernel, dilation), _ = _case(name)
    return attention.na2d(q, k, v, kernel, dilation, method="matmul")


@pytest.mark.parametrize("tile", [1, 3, 8])
@pytest.mark.parametrize("budget", [1, 60_000])
@pytest.mark.parametrize("name", ["k3-d3-rect", "k4-even-d2", "k7-d32-peraxis", "k12x6-d24", "k10-full-axis", "k13-d2"])
def test_eager_matmul_tiles_equal_natten_and_the_traced_path(name: str, budget: int, tile: int, monkeypatch) -> None:
    """`_matmul_banded` (one-hot selection of each query tile's scores) at tiles of 1, 3 and 8 group
    positions and bands of one or several row groups: tile and band edges fall inside and across the
    clamped borders, on sizes that are not multiples of the dilation (groups of two lengths). It equals
    natten and the whole-map form that is traced for export (windows of k and v by one-hot MatMul)."""
    from weftlib.attention import formulations

    (q, k, v, kernel, dilation), ref = _case(name)
    traced_form = _whole_map_matmul(name)
    monkeypatch.setattr(formulations, "BAND_BYTES", budget)
    monkeypatch.setattr(formulations, "MATMUL_TILE", tile)
    out = attention.na2d(q, k, v, kernel, dilation, method="matmul")
    err, gap = (out - ref).abs().max().item(), (out - traced_form).abs().max().item()
    assert err <= TOL, f"tiled matmul differs from natten by {err:.3g} on {name} (tile {tile}, budget {budget})"
    assert gap <= TOL, f"tiled matmul differs from the traced form by {gap:.3g} on {name}"


def test_eager_matmul_selects_by_matmul_only(monkeypatch) -> None:
    """The eager tiled path stays the 'matmul' formulation: every aten op it runs is recorded, and none
    indexes k or v by a table (Gather-type) or masks scores; the selection runs as batched MatMuls."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from weftlib.attention import formulations

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    (q, k, v, kernel, dilation), ref = _case("k7-d32-peraxis")
    monkeypatch.setattr(formulations, "BAND_BYTES", 1)
    monkeypatch.setattr(formulations, "MATMUL_TILE", 3)
    with Ops() as ops:
        out = attention.na2d(q, k, v, kernel, dilation, method="matmul")
    assert (out - ref).abs().max().item() <= TOL
    gathers = {"index", "index_select", "gather", "take", "take_along_dim", "embedding", "index_put", "scatter"}
    masks = {"where", "masked_fill", "masked_select"}
    assert not ops.names & (gathers | masks), sorted(ops.names & (gathers | masks))
    assert "bmm" in ops.names, sorted(ops.names)
    with Ops() as control:  # the recorder does see a Gather-type op where one runs: 'gather' (banded)
        attention.na2d(q, k, v, kernel, dilation, method="gather")
    assert "index_select" in control.names, sorted(control.names)


def test_band_rows_respects_the_budget() -> None:
    from weftlib.attention import formulations

    assert formulations.band_rows(512, 10, 1000) == 100
    assert formulations.band_rows(512, 10**9, 1000) == 1  # never zero rows
    assert formulations.band_rows(8, 1, 1000) == 8  # never more than the map


def test_constants_cached_while_an_exporter_traces_stay_plain_arrays(tmp_path):
    """A cached tensor made inside a trace is that trace's FakeTensor; the next export at the same shape then
    crawled (5.5 min instead of 4 s in 02's appendix run). The caches must hold numpy, whoever filled them."""
    from weftlib.attention import formulations
    from weftlib.onnx_core import export as onnx_export

    for cached in (
        index_math.neighbor_index,
        index_math.neighbor_mask,
        index_math.onehot_tiles,
        index_math.halo_plan,
        formulations._mask_bias,
    ):
        cached.cache_clear()
    size, kernel, dil = (11, 13), (3, 3), (2, 1)
    q, k, v = (torch.randn(1, *size, 2, 4) for _ in range(3))

    class Call(torch.nn.Module):
        def __init__(self, method: str) -> None:
            super().__init__()
            self.method = method

        def forward(self, q, k, v):
            return attention.na2d(q, k, v, kernel, dil, method=self.method)

    for method in ("masked", "gather", "matmul"):
        onnx_export.export(
            Call(method), (q, k, v), tmp_path / f"{method}.onnx", input_names=["q", "k", "v"], output_names=["o"]
        )
    filled = [
        index_math.onehot_tiles(size[0], kernel[0], dil[0]),
        index_math.halo_plan(size, kernel, dil),
        index_math.neighbor_mask(size, kernel, dil),
        formulations._mask_bias(size, kernel, dil),
    ]
    assert index_math.onehot_tiles.cache_info().hits >= 1 and formulations._mask_bias.cache_info().hits >= 1
    leaves = [x for f in filled for x in (f.values() if isinstance(f, dict) else f if isinstance(f, tuple) else [f])]
    assert not any(isinstance(x, torch.Tensor) for x in leaves), [type(x).__name__ for x in leaves]
