"""weftlib.trace: the static scan, the call tracer (on a throwaway target package) and the audit."""

from __future__ import annotations

import builtins
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
import torch

from weftlib import trace
from weftlib.trace import calls
from weftlib.trace import cost as trace_cost

CORE = """\
def outer(x):
    return inner(x) + 1


def inner(x):
    return x * 2


def apply(f, x):
    return f(x)


def boom(x):
    return _fail(x)


def _fail(x):
    raise RuntimeError("no kernel here")


def shapes(t):
    return tuple(t.shape)
"""

USER = """\
import threading

import {pkg}


def run(x):
    return {pkg}.outer(x)


def run_boom():
    return {pkg}.boom(1)


def callback(x):
    return {pkg}.inner(x)


def run_apply(x):
    return {pkg}.apply(callback, x)


def run_import():
    import {pkg}_nested_a
    return {pkg}_nested_a.VALUE


def run_thread():
    out = []
    worker = threading.Thread(target=lambda: out.append({pkg}.inner(5)))
    worker.start()
    worker.join()
    return out[0]


def never(n):
    return sum(len(str(i)) for i in range(n))
"""


def line_of(path: Path, needle: str) -> int:
    """1-based line of the first line containing `needle` (so tests do not hard-code line numbers)."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    """A uniquely named target package, a user module calling it, and two nested-import modules."""
    pkg = f"wefttarget_{uuid.uuid4().hex[:8]}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text(f"from {pkg}.core import apply, boom, inner, outer, shapes\n")
    (tmp_path / pkg / "core.py").write_text(CORE)
    (tmp_path / f"{pkg}_user.py").write_text(USER.format(pkg=pkg))
    (tmp_path / f"{pkg}_nested_a.py").write_text(f"import {pkg}_nested_b\nVALUE = {pkg}_nested_b.VALUE + 1\n")
    (tmp_path / f"{pkg}_nested_b.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    user = __import__(f"{pkg}_user")
    yield pkg, user, tmp_path
    for name in [m for m in sys.modules if m.startswith(pkg)]:
        del sys.modules[name]


# -------------------------------------------------------------------------------------------- static scan


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_static_scan_classifies_each_line(tmp_path):
    write(
        tmp_path,
        "pkg/model.py",
        """\
        import os
        import natten.functional as nf
        from natten import na2d
        # import natten  (commented out: a mention)
        import torch
        net = torch.hub.load("owner/repo", "entry", trust_repo=True)
        nattenx = 1
        """,
    )
    write(tmp_path, "hub/hubconf.py", 'dependencies = ["torch", "natten"]\n')
    write(tmp_path, "requirements.txt", "torch>=2\nNATTEN==0.21.7  # kernels\n")
    write(tmp_path, "README.md", "Install:\n\n    pip install natten\n\nnatten is fast.\n")
    write(tmp_path, ".git/config", "natten\n")
    (tmp_path / "blob.bin").write_bytes(b"\0natten\0")
    hits = [(h.kind, h.path, h.line) for h in trace.static_scan(tmp_path, "natten")]
    assert hits == [
        ("install", "README.md", 3),
        ("mention", "README.md", 5),
        ("hub_dependency", "hub/hubconf.py", 1),
        ("import", "pkg/model.py", 2),
        ("import", "pkg/model.py", 3),
        ("mention", "pkg/model.py", 4),
        ("hub_load", "pkg/model.py", 6),
        ("requirement", "requirements.txt", 2),
    ]
    hub = next(h for h in trace.static_scan(tmp_path, "natten") if h.kind == "hub_load")
    assert hub.detail == "repo='owner/repo', entry='entry', source=github"


def test_static_scan_rejects_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="root"):
        trace.static_scan(tmp_path / "missing", "natten")
    with pytest.raises(ValueError, match="name"):
        trace.static_scan(tmp_path, "nat ten")


def test_declared_dependencies_and_assignments(tmp_path):
    write(tmp_path, "pyproject.toml", '[project]\nname = "h"\ndependencies = [\n  "Py_YAML>=6",\n]\n')
    write(tmp_path, "requirements.txt", "# comment\ntorch\n-e .\ngit+https://x/y.git\n")
    write(tmp_path, "demo/requirements.txt", "natten\n")
    write(tmp_path, "cfg.py", "TABLE = {'a': {'flag': True}}\nOTHER = make()\n")
    assert trace.declared_dependencies(tmp_path) == {"torch": ["requirements.txt:2"], "py-yaml": ["pyproject.toml:4"]}
    assert trace.find_assignments(tmp_path, "TABLE") == [("cfg.py", 1, {"a": {"flag": True}})]
    assert trace.find_assignments(tmp_path, "OTHER") == []


# ------------------------------------------------------------------------------------------------ tracing


def test_chain_from_user_code_into_target(fake):
    pkg, user, root = fake
    user_py = root / f"{pkg}_user.py"
    result = trace.trace_calls(user.run, 3, target=pkg)
    assert result.result == 7 and result.error is None
    call = f"{pkg}_user.py:{line_of(user_py, f'return {pkg}.outer(x)')}"
    assert [str(c) for c in result.chains] == [f"{call} -> {pkg}.core.outer", f"{call} -> {pkg}.core.outer -> inner"]
    assert [str(c) for c in result.leaves()] == [f"{call} -> {pkg}.core.outer -> inner"]
    assert [(e.function, e.args) for e in result.entries] == [(f"{pkg}.core.outer", {"x": 3})]  # inner is internal


def test_a_raising_call_keeps_its_chains(fake):
    pkg, user, _ = fake
    result = trace.trace_calls(user.run_boom, target=pkg)
    assert isinstance(result.error, RuntimeError) and result.result is None
    assert result.raised == "RuntimeError: no kernel here"
    assert result.ending(f"{pkg}.core.boom -> _fail")
    assert str(result.error_chain).endswith(f"{pkg}.core.boom -> _fail")


def test_target_calling_back_into_user_code(fake):
    pkg, user, root = fake
    user_py = root / f"{pkg}_user.py"
    result = trace.trace_calls(user.run_apply, 4, target=pkg)
    assert result.result == 8
    outer = line_of(user_py, f"return {pkg}.apply(callback, x)")
    inner = line_of(user_py, f"return {pkg}.inner(x)")
    expected = f"{pkg}_user.py:{outer} -> {pkg}.core.apply -> {pkg}_user.py:{inner} -> {pkg}.core.inner"
    assert expected in [str(c) for c in result.chains]
    assert len(result.entries) == 2  # entered twice from outside: apply, then inner from the callback


def test_nested_imports_name_their_importer(fake):
    pkg, user, root = fake
    result = trace.trace_calls(user.run_import, target=pkg)
    assert result.result == 42 and not result.entered
    events = {e.name: e for e in result.imports}
    a, b = events[f"{pkg}_nested_a"], events[f"{pkg}_nested_b"]
    assert a.importer == f"{pkg}_user.py:{line_of(root / f'{pkg}_user.py', f'import {pkg}_nested_a')}"
    assert b.importer == f"{pkg}_nested_a.py:1" and a.new and b.new and b.direct
    assert str(b.chain) == f"{a.importer} -> {pkg}_nested_a.py:1"
    assert {f"{pkg}_nested_a", f"{pkg}_nested_b"} <= set(result.new_modules)


def test_target_never_reached_records_nothing_and_never_walks_the_stack(fake, monkeypatch):
    pkg, user, _ = fake
    walks = []
    original = calls._Tracer.chain
    monkeypatch.setattr(calls._Tracer, "chain", lambda self, frame: walks.append(1) or original(self, frame))
    result = trace.trace_calls(user.never, 2000, target=pkg)
    assert result.result == user.never(2000)
    assert not result.entered and result.chains == [] and result.entries == [] and walks == []


def test_calls_in_threads_started_during_the_call(fake):
    pkg, user, root = fake
    result = trace.trace_calls(user.run_thread, target=pkg)
    assert result.result == 10
    line = line_of(root / f"{pkg}_user.py", "lambda: out.append")
    assert f"{pkg}_user.py:{line} -> {pkg}.core.inner" in [str(c) for c in result.chains]


def test_previous_hooks_are_fed_and_restored(fake):
    pkg, user, _ = fake
    seen = []

    def previous(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    import_before, thread_before = builtins.__import__, threading.getprofile()
    sys.setprofile(previous)
    try:
        result = trace.trace_calls(user.run_boom, target=pkg)
        assert sys.getprofile() is previous
    finally:
        sys.setprofile(None)
    assert result.error is not None and "_fail" in seen
    assert builtins.__import__ is import_before and threading.getprofile() is thread_before


def test_tensor_arguments_are_summarised(fake):
    pkg, _, _ = fake
    module = sys.modules[pkg]
    result = trace.trace_calls(module.shapes, torch.zeros(2, 3), target=pkg)
    spec = result.entries[0].args["t"]
    assert spec == trace.TensorSpec((2, 3), "torch.float32", "cpu") and spec.empty().shape == (2, 3)


def test_tracer_argument_errors():
    with pytest.raises(ModuleNotFoundError, match="target"):
        trace.trace_calls(print, target="no_such_package_xyz")
    with pytest.raises(ValueError, match="target"):
        trace.trace_calls(print, target="not a name")
    with pytest.raises(TypeError, match="fn"):
        trace.trace_calls(42, target="json")


# -------------------------------------------------------------------------------------------------- audit


def test_audit_flags_a_hub_import_the_host_does_not_declare(tmp_path):
    import natten  # noqa: F401  (a required dependency: the hub below imports it, a broken install must fail)

    host = tmp_path / "host"
    write(host, "requirements.txt", "torch\nPyYAML\n")
    write(host, "demo/requirements.txt", "natten\n")
    write(host, "host.py", "import torch\nimport yaml\n")
    hub = tmp_path / "hub"
    write(hub, "hubconf.py", 'dependencies = ["natten"]\nimport natten\n\ndef entry():\n    return 1\n')
    loaded = trace.trace_calls(torch.hub.load, str(hub), "entry", source="local", trust_repo=True)
    assert loaded.result == 1
    rows = {r.distribution: r for r in trace.audit(host, [loaded])}
    row = rows["natten"]
    assert row.imported and row.through_hub and row.declared == ()
    assert row.first_importer == "hubconf.py:2" and row.flag.startswith("undeclared")
    assert row.install_hints == ("requirement demo/requirements.txt:1",) and row.host_imports == ()
    assert rows["pyyaml"].declared == ("requirements.txt:2",) and not rows["pyyaml"].imported
    assert rows["pyyaml"].host_imports == ("host.py:2",)
    assert rows["pyyaml"].flag == "declared, not imported in the traced calls"
    with pytest.raises(TypeError, match="traces"):
        trace.audit(host, loaded)


def test_audit_ignores_imports_made_inside_other_libraries(tmp_path):
    write(tmp_path, "requirements.txt", "torch\n")
    library = trace.Frame("/site-packages/torch/x.py", 3, "<module>", "torch.x", False, True)
    mine = trace.Frame(str(tmp_path / "mine.py"), 7, "run", "mine", False, False)
    transitive = trace.ImportEvent("yaml", "x.py:3", True, trace.CallChain((mine, library)))
    direct = trace.ImportEvent("yaml", "mine.py:7", False, trace.CallChain((mine,)))
    assert not transitive.direct and direct.direct
    rows = {r.distribution: r for r in trace.audit(tmp_path, [trace.CallTrace("json", imports=[transitive])])}
    assert "pyyaml" not in rows
    rows = {r.distribution: r for r in trace.audit(tmp_path, [trace.CallTrace("json", imports=[direct])])}
    assert rows["pyyaml"].imported and rows["pyyaml"].first_importer == "mine.py:7"
    assert rows["pyyaml"].flag.startswith("undeclared") and not rows["pyyaml"].through_hub


# ------------------------------------------------------------------------------------------ probes, tree


def test_verdicts_keep_the_refusal_reason():
    def refuse():
        raise ValueError("head dims differ")

    got = trace.verdicts({"yes": lambda: True, "no": lambda: 0, "refuses": refuse})
    assert [(v.name, v.ok, v.reason) for v in got] == [
        ("yes", True, ""),
        ("no", False, ""),
        ("refuses", False, "ValueError: head dims differ"),
    ]
    with pytest.raises(TypeError, match="checks"):
        trace.verdicts({"bad": 3})


def test_chain_tree_merges_shared_prefixes():
    def frame(name, target=True):
        return trace.Frame("/x/a.py", 1, name, "m", target, target)

    first = trace.CallChain((frame("u", False), frame("f"), frame("g")))
    second = trace.CallChain((frame("u", False), frame("f"), frame("h")))
    nodes, edges = trace.chain_tree([first, second])
    assert [n[2] for n in nodes] == ["a.py:1", "m.f", "g", "h"]
    assert edges == [(0, 1), (1, 2), (1, 3)] and nodes[3][1] == 1


def test_tracing_overhead_reports_interleaved_medians(fake):
    pkg, user, _ = fake
    got = trace.tracing_overhead(user.never, 500, target=pkg, repeats=3)
    assert set(got) == {"plain_s", "empty_hook_s", "traced_s", "traced_over_plain", "traced_over_empty_hook"}
    assert all(v > 0 for v in got.values())
    assert got["traced_over_plain"] == pytest.approx(got["traced_s"] / got["plain_s"])
    with pytest.raises(ValueError, match="repeats"):
        trace.tracing_overhead(user.never, 5, target=pkg, repeats=0)


def test_refuses_to_displace_a_c_profiler(fake):
    import cProfile

    pkg, user, _ = fake
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        with pytest.raises(RuntimeError, match="cProfile"):
            trace.trace_calls(user.run, 1, target=pkg)
        assert sys.getprofile() is profiler
    finally:
        profiler.disable()


def test_tracing_cost_separates_the_fixed_cost_from_a_long_enough_workload(fake):
    pkg, user, _ = fake
    got = trace.tracing_cost(user.never, 2000, target=pkg, repeats=3, min_seconds=0.02)
    assert set(got) == {
        "calls",
        "rounds",
        "plain_ms",
        "empty_hook_ms",
        "traced_ms",
        "fixed_overhead_us",
        "overhead_us_per_call",
        "traced_over_plain",
        "traced_over_empty_hook",
        "plain_min_ms",
        "empty_hook_min_ms",
        "traced_min_ms",
        "rate_change",
        "others_cores",
        "contended",
    }
    assert got["calls"] >= 1 and got["fixed_overhead_us"] >= 0 and isinstance(got["contended"], bool)
    # judged on the minima of the interleaved rounds (noise only adds time); the medians are shown
    assert got["plain_min_ms"] <= got["plain_ms"] and got["traced_min_ms"] <= got["traced_ms"]
    assert got["traced_over_plain"] == pytest.approx(got["traced_min_ms"] / got["plain_min_ms"])
    assert got["traced_over_empty_hook"] == pytest.approx(got["traced_min_ms"] / got["empty_hook_min_ms"])
    per_call = (got["traced_min_ms"] - got["plain_min_ms"]) * 1e3 / got["calls"]
    assert got["overhead_us_per_call"] == pytest.approx(per_call)


def test_tracing_cost_stops_at_rounds_that_settle(fake, monkeypatch):
    """A workload of seconds (NAF's forward at 512^2) stops once every variant's samples are settled; a
    short one runs every round."""
    pkg, user, _ = fake
    assert trace.tracing_cost(user.never, 200, target=pkg, repeats=3, min_seconds=0.001)["rounds"] == 3
    seen = []
    monkeypatch.setattr(trace_cost.measure, "settled", lambda times: seen.append(len(times)) or len(times) >= 2)
    assert trace.tracing_cost(user.never, 200, target=pkg, repeats=5, min_seconds=0.001)["rounds"] == 2
    assert seen == [1, 2, 2, 2]  # after round one plain is unsettled; after two, all three are asked


def test_tracing_cost_repeats_a_short_call_and_keeps_going_past_errors(fake):
    pkg, user, _ = fake
    calls = []

    def short_then_fail():
        calls.append(1)
        raise RuntimeError("backend missing")

    got = trace.tracing_cost(short_then_fail, target=pkg, repeats=1, min_seconds=0.001)
    assert got["calls"] > 1, "a call of microseconds was not repeated into a measurable workload"
    assert len(calls) == 1 + 3 * got["calls"]  # warm-up, then plain, empty hook and traced
    for bad, match in (
        ({"repeats": 0}, "repeats"),
        ({"min_seconds": 0}, "min_seconds"),
        ({"target": "no such"}, "target"),
    ):
        with pytest.raises(ValueError, match=match):
            trace.tracing_cost(user.never, 5, **{"target": pkg, **bad})
    with pytest.raises(TypeError, match="fn"):
        trace.tracing_cost(3, target=pkg)


@pytest.mark.parametrize(
    "line, name",
    [
        ("NATTEN==0.21.7  # kernels", "natten"),
        ("    \"Foo_Bar[cuda]>=1; python_version > '3.10'\",", "foo-bar"),  # a pyproject/setup.py list item
        ('natten = {version = "*"}', "natten"),  # a Pipfile entry
        ("name @ https://example.org/name-1.0.whl", "name"),
        ("-e .", None),
        ("git+https://x/y.git", None),
        ("# natten", None),
        ("[packages]", None),
        ("", None),
    ],
)
def test_requirement_name_reads_manifest_lines(line, name):
    assert trace.requirement_name(line) == name


def test_config_rows_give_naf_configs_twice_the_width():
    rows = trace.config_rows(
        {"ss": {"image_size": 518}, "tex": {"use_naf_upsample": True, "grid_resolution": 64}}, 1024
    )
    assert rows == [
        {"config": "ss", "use_naf_upsample": False, "image_size": 518, "grid_resolution": None, "proj_channels": 1024},
        {"config": "tex", "use_naf_upsample": True, "image_size": None, "grid_resolution": 64, "proj_channels": 2048},
    ]


def test_natten_answer_names_the_call_the_flag_and_the_mismatch():
    from weftlib.trace.checkpoint import FlagResult, Mismatch

    off = FlagResult(
        "use_naf_upsample", False, (Mismatch("proj.weight", (8, 1024), (8, 2048)),), (), (), "size mismatch"
    )
    text = trace.natten_answer("a -> b -> cutlass_fna_generic", "imported via torch.hub only", off)
    assert text.startswith("natten is not optional: NAF's forward reaches cutlass_fna_generic through torch.hub ")
    assert "(imported via torch.hub only)" in text and text.endswith("proj.weight [8, 1024] vs [8, 2048])")
