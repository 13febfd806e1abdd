"""Parameter files are checked against each notebook's real `parameters` cell before anything runs."""

import time

import pytest

from weftlib.suite import params
from weftlib.__main__ import main


def plan(tiny_suite, text):
    nb_dir, write = tiny_suite
    return params.load_plan(write(text), notebook_dir=nb_dir)


def test_good_file_validates(tiny_suite):
    p = plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {size: 5, scale: 2, label: y}\n  - 20_bad\n")
    params.validate(p)
    assert [nb.name for nb in p.notebooks] == ["10_ok", "20_bad"]
    assert p.notebooks[0].parameters == {"size": 5, "scale": 2, "label": "y"}


def test_misspelled_key_names_file_key_and_valid_keys(tiny_suite):
    p = plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {sise: 5}\n")
    with pytest.raises(params.ParamsError) as err:
        params.validate(p)
    msg = str(err.value)
    assert "params.yaml" in msg and "sise" in msg and "did you mean 'size'" in msg
    assert "valid keys: label, scale, size" in msg


@pytest.mark.parametrize("value, word", [('"five"', "expected int"), ("true", "expected int"), ("[1]", "expected int")])
def test_wrong_type_is_refused(tiny_suite, value, word):
    p = plan(tiny_suite, f"notebooks:\n  - name: 10_ok\n    parameters: {{size: {value}}}\n")
    with pytest.raises(params.ParamsError, match=word):
        params.validate(p)


def test_int_may_stand_for_float_but_not_the_reverse(tiny_suite):
    params.validate(plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {scale: 1}\n"))
    with pytest.raises(params.ParamsError, match="expected int"):
        params.validate(plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {size: 1.5}\n"))


@pytest.mark.parametrize(
    "text, word",
    [
        ("notebooks: [10_ok]\ncell_timout: 5\n", "unknown key 'cell_timout'"),
        ("notebooks:\n  - name: 99_missing\n", "no notebook '99_missing'"),
        ("notebooks:\n  - name: 10_ok\n    parameters: {run_dir: /tmp}\n", "set by the runner"),
        ("notebooks: [10_ok, 10_ok]\n", "listed twice"),
        ("notebooks: [\n", "not valid YAML"),
        ("- just a list\n", "expected a mapping"),
    ],
)
def test_structural_errors(tiny_suite, text, word):
    with pytest.raises(params.ParamsError, match=word):
        params.validate(plan(tiny_suite, text))


def test_only_keeps_file_order_and_rejects_unknown(tiny_suite):
    nb_dir, write = tiny_suite
    path = write("notebooks: [10_ok, 20_bad]\n")
    assert [n.name for n in params.load_plan(path, ["20_bad"], nb_dir).notebooks] == ["20_bad"]
    with pytest.raises(params.ParamsError, match="'30_x' is not in this file"):
        params.load_plan(path, ["30_x"], nb_dir)


def test_digest_changes_with_values(tiny_suite):
    a = plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {size: 5}\n")
    b = plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {size: 6}\n")
    assert a.digest() != b.digest()


def test_cli_misspelled_key_fast_and_runs_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("notebooks:\n  - name: 00_overview\n    parameters: {appendix_ram_gb: 4}\n")
    out = tmp_path / "run"
    start = time.perf_counter()
    code = main(["run", "--params", str(bad), "--out", str(out), "--appendix", str(tmp_path / "app")])
    assert time.perf_counter() - start < 5
    assert code == 2
    err = capsys.readouterr().err
    assert "appendix_ram_gb" in err and "valid keys: appendix_ram_gib" in err
    assert not out.exists() and not (tmp_path / "app").exists()


def test_shipped_parameter_files_are_valid():
    for name in ("default.yaml", "appendix.yaml"):
        plan_ = params.load_plan(params.REPO_ROOT / "params" / name)
        params.validate(plan_)
        assert plan_.notebooks[0].name == "00_overview"


def test_params_that_is_a_directory_or_not_text_is_a_clear_error(tmp_path, capsys):
    binary = tmp_path / "bad.yaml"
    binary.write_bytes(b"\xff\xfe\x00notebooks")
    for target, word in ((tmp_path, "is a directory"), (binary, "not a UTF-8 text file")):
        with pytest.raises(params.ParamsError, match=word):
            params.load_plan(target)
        assert main(["run", "--params", str(target), "--out", str(tmp_path / "never")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and word in err and "Traceback" not in err
    assert not (tmp_path / "never").exists()


def test_appendix_flag(tiny_suite):
    assert plan(tiny_suite, "appendix: true\nnotebooks: [10_ok]\n").appendix is True
    assert plan(tiny_suite, "notebooks: [10_ok]\n").appendix is False
    with pytest.raises(params.ParamsError, match="expected true or false"):
        plan(tiny_suite, "appendix: yes please\nnotebooks: [10_ok]\n")
    assert params.load_plan(params.REPO_ROOT / "params" / "appendix.yaml").appendix
    assert not params.load_plan(params.REPO_ROOT / "params" / "default.yaml").appendix


def test_capabilities_judge_the_plans_notebooks_and_name_one_without_a_rule():
    """The notebook list is the plan's (both shipped plans hold the same notebooks); provenance only knows
    what each needs, and a notebook it has no rule for is an error, not a missing row."""
    from weftlib.gate.dfc_runner import image
    from weftlib.suite import provenance

    names = params.notebook_names()
    assert sorted(names) == sorted(params.notebook_names(params.REPO_ROOT / "params" / "appendix.yaml"))
    env = {
        "natten": {"libnatten": False, "cuda": False},
        "hailo_dfc": {"importable": False},
        "machine": {"ram_bytes": 8 * 2**30},
    }
    rows = {r["notebook"]: r for r in provenance.capabilities(env, 20.0)}
    assert list(rows) == names
    assert rows["03_sparse_conv_memory"]["fully here"] == "partly"  # 8 GiB of RAM, 20 wanted
    assert rows["04_gate_pairing"]["fully here"] == "partly" and image() in rows["04_gate_pairing"]["why"]
    with pytest.raises(ValueError, match="no capability rule for \\['06_new'\\]"):
        provenance.capabilities(env, 20.0, [*names, "06_new"])
