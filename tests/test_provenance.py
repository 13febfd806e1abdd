"""Provenance as people read it: a checkout's commit (one wording for outside code and `sources`), and the
overview's versions, machine, backend and commit lines."""

from __future__ import annotations

from weftlib.suite import provenance

COMMIT = "0123456789abcdef0123"


def test_a_commit_is_quoted_by_its_first_twelve_digits_and_its_dirtiness():
    assert provenance.short_commit({"commit": COMMIT, "dirty": False}) == "0123456789ab"
    assert provenance.short_commit({"commit": COMMIT, "dirty": True}) == "0123456789ab (dirty tree)"
    assert provenance.short_commit({"commit": None, "dirty": None}) is None


def test_outside_code_is_described_with_its_commit_or_as_no_checkout():
    code = {"notebook": "01_trace_natten", "parameter": "hub_dir", "path": "/hub", "runs": "hubconf.py"}
    dirty = provenance.describe_code({**code, "commit": COMMIT, "dirty": True})
    assert dirty == "01_trace_natten hub_dir = /hub (git 0123456789ab (dirty tree)): hubconf.py"
    plain = provenance.describe_code({**code, "commit": None, "dirty": None})
    assert plain == "01_trace_natten hub_dir = /hub (not a git checkout): hubconf.py"


def test_the_overview_reads_versions_against_the_pins():
    env = {"versions": {"torch": "2.13.0+cpu", "natten": "0.21.7", "onnx": None, "papermill": "2.5.0"}}
    pins = {"torch": "2.13.0", "natten": "0.21.6", "onnx": "1.19.0"}
    rows = provenance.version_rows(env, pins)
    assert rows[0] == {"package": "torch", "installed": "2.13.0+cpu", "pinned": "2.13.0"}
    assert rows[-1] == {"package": "papermill", "installed": "2.5.0", "pinned": ""}
    # a local build tag still matches its pin; another release does not; a missing package is not a mismatch
    assert provenance.mismatched_versions(env, pins) == ["natten"]


def test_the_overview_lines_name_the_machine_the_backend_and_the_commit():
    machine = {"platform": "Linux", "cpu_count": 2, "ram_bytes": 24 * 2**30, "gpu": None}
    assert provenance.machine_text(machine) == "2 CPUs, 24.0 GiB RAM, GPU: none"
    assert provenance.natten_backend_text({"libnatten": False}) == "Flex only (no libnatten)"
    assert provenance.natten_backend_text({"libnatten": True}) == "libnatten (CUTLASS)"
    assert provenance.commit_line({"commit": COMMIT, "dirty": False}) == f"commit {COMMIT} (clean tree)"
    assert provenance.commit_line({"commit": COMMIT, "dirty": True}) == f"commit {COMMIT} (dirty tree)"
    assert provenance.commit_line({"commit": None, "dirty": None}) == "not a git checkout"
