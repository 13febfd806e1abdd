"""How provenance quotes a checkout's commit: one wording for the outside code's log line and for `sources`."""

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
