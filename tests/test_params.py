"""Parameter files are checked against each notebook's real `parameters` cell before anything runs."""

import json
import time

import pytest
import yaml

from weftlib.__main__ import main
from weftlib.suite import params


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


@pytest.mark.parametrize(
    "value, word", [('"five"', "valid integer"), ("true", "valid integer"), ("[1]", "valid integer")]
)
def test_wrong_type_is_refused(tiny_suite, value, word):
    p = plan(tiny_suite, f"notebooks:\n  - name: 10_ok\n    parameters: {{size: {value}}}\n")
    with pytest.raises(params.ParamsError, match=word):
        params.validate(p)


def test_int_may_stand_for_float_but_not_the_reverse(tiny_suite):
    params.validate(plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {scale: 1}\n"))
    with pytest.raises(params.ParamsError, match="valid integer"):
        params.validate(plan(tiny_suite, "notebooks:\n  - name: 10_ok\n    parameters: {size: 1.5}\n"))


@pytest.mark.parametrize(
    "text, word",
    [
        ("notebooks: [10_ok]\ncell_timout: 5\n", "unknown key 'cell_timout'"),
        ("notebooks:\n  - name: 99_missing\n", "no notebook '99_missing'"),
        ("notebooks:\n  - name: 10_ok\n    parameters: {run_dir: /tmp}\n", "set by the runner"),
        ("notebooks: [10_ok, 20_bad, 10_ok]\n", "notebooks: 10_ok listed twice"),
        ("notebooks: [\n", "not valid YAML"),
        ("- just a list\n", "expected a mapping"),
    ],
)
def test_structural_errors(tiny_suite, text, word):
    with pytest.raises(params.ParamsError, match=word):
        params.validate(plan(tiny_suite, text))


@pytest.mark.parametrize(
    "text, where, why",
    [
        ("", "top level", "expected a mapping with a `notebooks` list"),
        ("notebooks: []\n", "notebooks", "expected a non-empty list of notebooks"),
        ("notebooks: [7]\n", "notebooks[0]", "expected a notebook name or a mapping with `name` and `parameters`"),
        ("notebooks: [10_ok, {name: 20_bad, params: {}}]\n", "notebooks[1]", "unknown key 'params'; valid keys: name"),
        ("notebooks:\n  - {name: 10_ok, parameters: [1]}\n", "notebooks[0].parameters", "expected a mapping"),
        ("notebooks:\n  - {name: 10_ok, parameters: {1: 2}}\n", "notebooks[0].parameters", "key 1 is not a"),
        ("notebooks: [10_ok]\ncell_timeout: true\n", "cell_timeout", "positive number of seconds, got True"),
        ("notebooks: [10_ok]\ncell_timeout: 0\n", "cell_timeout", "positive number of seconds, got 0"),
        ("1: x\nnotebooks: [10_ok]\n", "top level", "unknown key 1; valid keys: appendix, cell_timeout"),
    ],
)
def test_a_shape_error_names_the_file_and_the_place(tiny_suite, text, where, why):
    """The plan file's shape is pydantic's to check; its refusal still reads `FILE: PLACE: PROBLEM`."""
    with pytest.raises(params.ParamsError) as err:
        plan(tiny_suite, text)
    assert str(err.value).startswith(f"{tiny_suite[0].parent / 'params.yaml'}: {where}: ") and why in str(err.value)


def test_an_empty_entry_parameters_and_a_description_are_read_as_before(tiny_suite):
    p = plan(tiny_suite, "description: 12\nnotebooks:\n  - {name: 10_ok, parameters: null}\n  - 20_bad\n")
    assert p.description == "12" and p.cell_timeout == 900 and not p.appendix
    assert [nb.parameters for nb in p.notebooks] == [{}, {}] and p.notebooks[1].path.name == "20_bad.ipynb"


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
    assert plan(tiny_suite, "notebooks: [10_ok]\n").appendix is False
    with pytest.raises(params.ParamsError, match="expected true or false"):
        plan(tiny_suite, "appendix: yes please\nnotebooks: [10_ok]\n")
    assert params.load_plan(params.REPO_ROOT / "params" / "appendix.yaml").appendix
    assert not params.load_plan(params.REPO_ROOT / "params" / "default.yaml").appendix


def test_capabilities_judge_the_plans_notebooks_and_name_one_without_a_rule():
    """The notebook list is the plan's (both shipped plans hold the same notebooks); provenance only knows
    what each needs, and a notebook it has no rule for is an error, not a missing row."""
    from weftlib.gate.compiler.dfc_target import image
    from weftlib.suite import capabilities

    names = params.notebook_names()
    assert sorted(names) == sorted(params.notebook_names(params.REPO_ROOT / "params" / "appendix.yaml"))
    env = {
        "natten": {"libnatten": False, "cuda": False},
        "hailo_dfc": {"importable": False},
        "machine": {"ram_bytes": 8 * 2**30},
    }
    rows = {r["notebook"]: r for r in capabilities.by_notebook(env, 20.0)}
    assert list(rows) == names
    assert rows["03_sparse_conv_memory"]["fully here"] == "partly"  # 8 GiB of RAM, 20 wanted
    assert rows["05_gate_pairing"]["fully here"] == "partly" and image() in rows["05_gate_pairing"]["why"]
    with pytest.raises(ValueError, match="no capability rule for \\['06_new'\\]"):
        capabilities.by_notebook(env, 20.0, [*names, "06_new"])


# ---- hostile plans: each refused before anything runs, naming the file, the key and why -------------------------


def real_plan(tmp_path, text):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return path


def refused_by_check(path, capsys, *words):
    """`check` and `run` both exit 2 with one error line naming it all; `run` creates no run folder."""
    assert main(["check", "--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    out = path.parent / "never"
    assert main(["run", "--params", str(path), "--out", str(out), "--no-publish"]) == 2
    capsys.readouterr()
    assert not out.exists()
    return err


@pytest.mark.parametrize(
    "notebook, key, value, where, why",
    [
        ("02_export_attention", "equality_atol", "-1.0e-5", "equality_atol", "greater than 0"),
        ("02_export_attention", "equality_atol", ".inf", "equality_atol", "finite number"),  # a vacuous PASS
        ("02_export_attention", "export_atol", ".nan", "export_atol", "finite number"),
        ("02_export_attention", "threads", "0", "threads", "greater than or equal to 1"),
        (
            "02_export_attention",
            "naf_method",
            "bogus",
            "naf_method",
            "'masked', 'gather', 'matmul', 'shift' or 'lowres'",
        ),
        ("02_export_attention", "naf_reference", "cuda", "naf_reference", "'natten', 'masked'"),
        ("02_export_attention", "bench_sizes", '["x", null]', "bench_sizes[0]", "valid integer, got str 'x'"),
        ("02_export_attention", "bench_naf", "[[512]]", "bench_naf[0]", "at least 2 items"),
        (
            "02_export_attention",
            "bench_naf_methods",
            "[gather, fast]",
            "bench_naf_methods[1]",
            "'lowres', got str 'fast'",
        ),
        (
            "02_export_attention",
            "naf_rewrite_grid",
            "[12, 16]",
            "naf_rewrite_grid",
            "expected [] or [low, ratio, channels]",
        ),
        ("02_export_attention", "hub_kwargs", "[pretrained]", "hub_kwargs", "valid dictionary"),
        ("03_sparse_conv_memory", "measure_threads", "0", "measure_threads", "greater than or equal to 1"),
        ("03_sparse_conv_memory", "measure_dtype", "float64", "measure_dtype", "'float32' or 'float16'"),
        ("03_sparse_conv_memory", "shapes", "[sphere, cube]", "shapes[1]", "'bunny', got str 'cube'"),
        ("03_sparse_conv_memory", "ratio_limit", ".inf", "ratio_limit", "finite number"),
        ("04_export_dit_block", "atol", "0", "atol", "greater than 0"),
        ("04_export_dit_block", "host_root", "/no/such/checkout", "host_root", "no directory '/no/such/checkout'"),
        ("01_trace_natten", "feature_grid", "8", "feature_grid", "greater than or equal to 9"),
        ("01_trace_natten", "hub_kwargs", "[pretrained]", "hub_kwargs", "valid dictionary"),
        # issue 43: ranges and existence, before anything runs
        ("02_export_attention", "threads", str(10**23), "threads", "less than or equal to 1024"),
        ("03_sparse_conv_memory", "measure_threads", "4096", "measure_threads", "less than or equal to 1024"),
        ("01_trace_natten", "image_size", str(2**40), "image_size", "less than or equal to 2147483647"),
        ("05_gate_pairing", "graph_notebooks", "[../../..]", "graph_notebooks[0]", "got str '../../..'"),
        ("06_device_cut", "graph_notebooks", "[02_export_attention, 99_x]", "graph_notebooks[1]", "got str '99_x'"),
        ("05_gate_pairing", "device_ops_file", "no/such.yaml", "device_ops_file", "no file 'no/such.yaml'"),
        ("05_gate_pairing", "dfc_results_dir", "no/such/dir", "dfc_results_dir", "no directory 'no/such/dir'"),
        ("06_device_cut", "dfc_results_dir", "no/such/dir", "dfc_results_dir", "no directory 'no/such/dir'"),
        ("05_gate_pairing", "probe_results_dir", "no/such/dir", "probe_results_dir", "no directory"),
        ("05_gate_pairing", "arch", "hailo8", "arch", "'hailo10h'"),
    ],
)
def test_a_value_that_would_fail_late_or_pass_vacuously_is_refused(tmp_path, capsys, notebook, key, value, where, why):
    path = real_plan(tmp_path, f"notebooks:\n  - name: {notebook}\n    parameters:\n      {key}: {value}\n")
    refused_by_check(path, capsys, f"{notebook}.parameters.{where}: ", why)


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path, capsys):
    path = real_plan(
        tmp_path,
        "notebooks:\n  - name: 02_export_attention\n    parameters:\n      threads: 2\n      dim: 16\n      threads: 1\n",
    )
    refused_by_check(path, capsys, "key 'threads' written twice (lines 4 and 6)")
    top = real_plan(tmp_path, "cell_timeout: 60\nnotebooks: [00_overview]\ncell_timeout: 5\n")
    refused_by_check(top, capsys, "key 'cell_timeout' written twice (lines 1 and 3)")


def test_a_key_written_twice_in_a_flow_mapping_is_refused_too(tmp_path, capsys):
    """`{dim: 16, dim: 8}` on one line was accepted with rc 0 (YAML keeps the last); it is refused."""
    path = real_plan(tmp_path, "notebooks:\n  - name: 02_export_attention\n    parameters: {dim: 16, dim: 8}\n")
    refused_by_check(path, capsys, "key 'dim' written twice (line 3, columns 18 and 27)")
    nested = real_plan(tmp_path, "notebooks: [{name: 00_overview, name: 01_trace_natten}]\n")
    refused_by_check(nested, capsys, "key 'name' written twice")


@pytest.mark.parametrize(
    "name",
    [
        "../notebooks/00_overview",
        "/work/notebooks/00_overview",
        "00_overview.ipynb",
        "notebooks/00_overview",
        "0_x",
        10,
    ],
)
def test_a_notebook_name_is_a_plain_name_of_the_notebook_folder(tmp_path, capsys, name, notebooks):
    """A path once passed `check` and ran, overwriting the source notebook and writing HTML beside it."""
    source = notebooks["00_overview"].read_bytes()
    path = real_plan(tmp_path, f"notebooks:\n  - name: {json.dumps(name)}\n")
    refused_by_check(path, capsys, "notebooks[0].name: ", "is not a notebook name", "never a path")
    assert notebooks["00_overview"].read_bytes() == source
    assert not (notebooks["00_overview"].parent / "00_overview.html").exists()


def test_a_duplicate_notebook_is_named(tmp_path, capsys):
    path = real_plan(tmp_path, "notebooks: [00_overview, 05_gate_pairing, 00_overview]\n")
    refused_by_check(path, capsys, "00_overview listed twice")


# ---- the appendix is the full plan, not whatever says `appendix: true` --------------------------------------------


def appendix_variant(tmp_path, edit):
    data = yaml.safe_load((params.FULL_PLAN).read_text())
    edit(data)
    return real_plan(tmp_path, yaml.safe_dump(data, sort_keys=False))


def test_appendix_true_on_a_plan_that_is_not_the_full_plan_is_refused(tmp_path, capsys, tiny_suite):
    overview = real_plan(tmp_path, "appendix: true\nnotebooks: [00_overview]\n")
    refused_by_check(
        overview, capsys, "appendix: true, but only a run of the full plan (appendix.yaml", "runs 00_overview"
    )
    with pytest.raises(params.ParamsError, match="this plan runs 10_ok"):
        params.validate(plan(tiny_suite, "appendix: true\nnotebooks: [10_ok]\n"))

    def smaller(data):
        data["notebooks"][1]["parameters"]["image_size"] = 64

    refused_by_check(
        appendix_variant(tmp_path, smaller), capsys, "01_trace_natten.image_size = 64 does less than its 512"
    )

    def fewer_methods(data):
        data["notebooks"][2]["parameters"]["bench_naf_methods"] = ["gather"]

    refused_by_check(appendix_variant(tmp_path, fewer_methods), capsys, "bench_naf_methods")


def test_the_full_plan_and_plans_doing_at_least_as_much_are_the_appendix(tmp_path):
    params.validate(params.load_plan(params.FULL_PLAN))

    def more(data):
        data["notebooks"][2]["parameters"]["bench_repeats"] = 5
        data["notebooks"][3]["parameters"]["count_resolutions"].append(2048)

    params.validate(params.load_plan(appendix_variant(tmp_path, more)))
    part = params.load_plan(params.FULL_PLAN, ["02_export_attention"])  # --only: a part of the appendix
    assert part.partial and part.appendix
    params.validate(part)


def test_covers():
    assert params.covers(1024, 512) and not params.covers(256, 512)
    assert params.covers([64, 1024], [64, 512]) and not params.covers([64], [64, 1024])
    assert params.covers({"pretrained": False, "channels": 2048}, {"pretrained": False, "channels": 1024})
    assert not params.covers({"pretrained": True, "channels": 1024}, {"pretrained": False, "channels": 1024})
    assert params.covers("lowres", "lowres") and not params.covers("shift", "lowres")
    assert not params.covers(True, 1) and params.covers([[512, 32]], [[512, 32]])


# ---- --set KEY=VALUE: one value for every notebook that has the parameter ----------------------------------


def _checkout(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_set_gives_the_value_to_every_notebook_with_that_parameter():
    from weftlib import standins

    plan_ = params.apply_settings(
        params.load_plan(params.DEFAULT_PLAN),
        [f"hub_dir={standins.NAF_HUB_DIR}", f"host_root={standins.HOST_ROOT}", "threads=3"],
    )
    given = {nb.name: nb.parameters for nb in plan_.notebooks}
    assert {n for n, p in given.items() if "hub_dir" in p} == {"01_trace_natten", "02_export_attention"}
    assert {n for n, p in given.items() if "host_root" in p} == {"01_trace_natten", "04_export_dit_block"}
    assert given["02_export_attention"]["threads"] == 3 and plan_.settings[-1] == "threads=3"
    params.validate(plan_)
    assert plan_.digest() != params.load_plan(params.DEFAULT_PLAN).digest()


@pytest.mark.parametrize(
    "setting, words",
    [
        ("no_such_knob=1", ["--set no_such_knob: no notebook of this plan", "has a parameter 'no_such_knob'"]),
        ("hub_dr=x", ["did you mean 'hub_dir'?"]),
        ("run_dir=/tmp/x", ["--set run_dir: is set by the runner"]),
        ("hub_dir", ["expected KEY=VALUE"]),
        ("hub_dir=/no/such/checkout", ["01_trace_natten.parameters.hub_dir", "no directory '/no/such/checkout'"]),
        ("threads=two", ["02_export_attention.parameters.threads", "valid integer"]),
        (f"threads={10**23}", ["02_export_attention.parameters.threads", "less than or equal to 1024"]),
        ("graph_notebooks=[../../..]", ["05_gate_pairing.parameters.graph_notebooks[0]", "'../../..'"]),
        ("device_ops_file=missing.yaml", ["05_gate_pairing.parameters.device_ops_file", "no file 'missing.yaml'"]),
        ("fix_variants=&a {k: *a}", ["--set fix_variants: a value holds itself"]),
        ("graph_notebooks=&a [*a]", ["--set graph_notebooks: a value holds itself"]),
        ("fix_variants=" + "[" * 5000 + "]" * 5000, ["nested deeper than YAML can be read"]),
        ("99_nothing.threads=2", ["--set 99_nothing.threads: 99_nothing is not a notebook of this plan"]),
        ("00_overview.threads=2", ["--set 00_overview.threads: 00_overview has no parameter 'threads'"]),
    ],
)
def test_set_refuses_what_no_notebook_may_take_and_runs_nothing(tmp_path, capsys, setting, words):
    with pytest.raises(params.ParamsError, match="--set"):
        params.apply_settings(params.load_plan(params.DEFAULT_PLAN), [setting])
    assert main(["check", "--set", setting]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set ") and "Traceback" not in err and all(w in err for w in words), err
    out = tmp_path / "never"
    assert main(["run", "--set", setting, "--out", str(out), "--no-publish"]) == 2
    assert not out.exists()


def test_a_setting_named_by_notebook_reaches_that_notebook_only(tmp_path):
    """05's and 06's `dfc_results_dir` are different folders (the graphs' pack, the cuts' pack): the bottom
    line's rerun gives each its own with `--set NOTEBOOK.KEY=VALUE`."""
    packs = {name: tmp_path / name for name in ("dfc_pack", "cut_pack")}
    for folder in packs.values():
        folder.mkdir()
    plan_ = params.apply_settings(
        params.load_plan(params.DEFAULT_PLAN),
        [f"05_gate_pairing.dfc_results_dir={packs['dfc_pack']}", f"06_device_cut.dfc_results_dir={packs['cut_pack']}"],
    )
    given = {nb.name: nb.parameters.get("dfc_results_dir") for nb in plan_.notebooks}
    assert given["05_gate_pairing"] == str(packs["dfc_pack"]) and given["06_device_cut"] == str(packs["cut_pack"])
    assert sum(v is not None for v in given.values()) == 2


def test_a_directory_parameter_must_be_a_checkout_of_its_repository(tmp_path, capsys):
    """hub_dir is valeoai/NAF (hubconf.py with a `naf` entry), host_root is Pixal3D (its flow model file),
    checked by reading the files, never running them; the stand-ins are laid out so they pass."""
    other = _checkout(tmp_path / "other", {"hubconf.py": "dependencies = []\n\ndef dino():\n    pass\n"})
    naf = _checkout(tmp_path / "NAF", {"hubconf.py": "raise SystemExit('never run')\nfrom src.model import naf\n"})
    pixal = _checkout(tmp_path / "Pixal3D", {"pixal3d/models/sparse_structure_flow.py": "raise SystemExit\n"})
    cases = [
        (f"hub_dir={tmp_path}", "is not a checkout of valeoai/NAF: it has no hubconf.py"),
        (f"hub_dir={other}", "is not a checkout of valeoai/NAF: its hubconf.py defines no `naf` entry"),
        (f"hub_dir={pixal}", "it has no hubconf.py"),
        (f"host_root={naf}", "is not a checkout of Pixal3D: it has no pixal3d/models/sparse_structure_flow.py"),
    ]
    for setting, why in cases:
        assert main(["check", "--set", setting]) == 2
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1, err
    plan_ = params.apply_settings(params.load_plan(params.DEFAULT_PLAN), [f"hub_dir={naf}", f"host_root={pixal}"])
    params.validate(plan_)
    assert main(["check", "--set", f"hub_dir={naf}", "--set", f"host_root={pixal}"]) == 0
    capsys.readouterr()
    with pytest.raises(params.ParamsError, match="given twice"):
        params.apply_settings(params.load_plan(params.DEFAULT_PLAN), [f"hub_dir={naf}", f"hub_dir={naf}"])


def test_sources_name_each_checkout_with_its_commit(tmp_path):
    import subprocess

    from weftlib.suite import provenance

    naf = _checkout(tmp_path / "NAF", {"hubconf.py": "def naf():\n    pass\n"})
    git = ["git", "-C", str(naf), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    text = provenance.sources("01_trace_natten", host_root="", hub_dir=str(naf))
    assert text == f"stand-in for Pixal3D; valeoai/NAF checkout at {commit[:12]}, {naf}"
    assert provenance.sources("02_export_attention", hub_dir="") == "stand-in for valeoai/NAF"
    plain = _checkout(tmp_path / "Pixal3D", {"pixal3d/models/sparse_structure_flow.py": ""})
    assert provenance.sources("04_export_dit_block", host_root=str(plain)).endswith(
        "(not a git checkout), " + str(plain)
    )


@pytest.mark.parametrize(
    "text, why",
    [
        ("notebooks: " + "[" * 20000 + "]" * 20000 + "\n", "nested deeper than YAML can be read"),
        (
            "notebooks:\n  - name: 05_gate_pairing\n    parameters:\n      fix_variants: &a {k: *a}\n",
            "a value holds itself",
        ),
        (
            "notebooks:\n  - name: 05_gate_pairing\n    parameters:\n      fix_variants: " + "[" * 40 + "]" * 40 + "\n",
            "nested more than 32 levels deep",
        ),
    ],
    ids=["nested past YAML's reach", "an alias inside its own anchor", "nested 40 deep"],
)
def test_a_plan_nested_too_deep_or_holding_itself_is_one_line(tmp_path, capsys, text, why):
    refused_by_check(real_plan(tmp_path, text), capsys, why)
