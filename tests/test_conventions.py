"""The notebook conventions (docs/notebooks.md), checked over what git would commit.

JupyterLab autosaves outputs into the working files; the `nbstrip` clean filter (scripts/nbstrip.py, switched
on by .gitattributes, configured by `make`) keeps them out of commits. So the conventions are checked on the
working file as the filter would store it, and "no outputs" on the blob in git's index (what a commit takes).
"""

import ast
import importlib.util
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from tests.conftest import NOTEBOOKS, REPO
from weftlib.suite.params import declared_parameters

_spec = importlib.util.spec_from_file_location("nbstrip", REPO / "scripts" / "nbstrip.py")
nbstrip = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbstrip)


def _git(*args, cwd=REPO, **kw):
    return subprocess.run(["git", *args], check=False, cwd=cwd, capture_output=True, text=True, **kw)


IN_GIT = shutil.which("git") is not None and _git("rev-parse", "--git-dir").returncode == 0


def committed(path):
    """The notebook as git would commit it: the working file through the clean filter."""
    return nbformat.reads(nbstrip.strip(path.read_text(encoding="utf-8")), as_version=4)


def staged_text(path):
    """The blob in git's index (what the next commit takes), else the working file outside a checkout."""
    if IN_GIT:
        out = _git("show", f":{path.relative_to(REPO).as_posix()}")
        if out.returncode == 0:
            return out.stdout
    return path.read_text(encoding="utf-8")


LITERAL_NODES = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.UnaryOp, ast.USub, ast.UAdd)


def code_cells(path):
    return [c for c in committed(path).cells if c.cell_type == "code"]


def is_literal(node: ast.AST) -> bool:
    return all(isinstance(n, (*LITERAL_NODES, ast.expr_context)) for n in ast.walk(node))


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def is_loop_in_disguise(node: ast.AST) -> bool:
    """A comprehension used as a statement (`[ax.plot(...) for ...]`): evaluated for its side effects, it is a
    `for` loop. One that builds a value (assigned, passed, returned, or a cell's shown last expression that
    is a table) is fine; a bare one is refused wherever it stands, last line included."""
    return isinstance(node, ast.Expr) and isinstance(node.value, COMPREHENSIONS)


def test_a_comprehension_statement_is_refused_like_a_loop():
    refused = [
        "[ax.plot(x) for x in xs]",
        "{print(k) for k in ks}",
        "(f(x) for x in xs)",
        "{k: f(k) for k in ks}",
        "if x:\n    [f(y) for y in x]",
    ]
    allowed = [
        "ys = [f(x) for x in xs]",
        "g([f(x) for x in xs])",
        "pd.DataFrame([{'a': x} for x in xs])",
        "assert all(f(x) for x in xs)",
        "x = {k: v for k, v in d.items()}",
    ]
    assert all(any(is_loop_in_disguise(n) for n in ast.walk(ast.parse(s))) for s in refused)
    assert not any(is_loop_in_disguise(n) for s in allowed for n in ast.walk(ast.parse(s)))


def test_the_suite_has_its_notebooks():
    assert list(NOTEBOOKS)[:1] == ["00_overview"]
    assert all(name[:2].isdigit() and name[2] == "_" for name in NOTEBOOKS)


@pytest.mark.parametrize("name", list(NOTEBOOKS))
class TestNotebook:
    def test_title_first_and_kernel(self, name):
        nb = committed(NOTEBOOKS[name])
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
        assert nb.metadata["kernelspec"]["name"] == "weftlib"

    def test_no_outputs(self, name):
        for cell in nbformat.reads(staged_text(NOTEBOOKS[name]), as_version=4).cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, cell.source[:60]

    def test_imports_first_then_one_literal_parameters_cell(self, name):
        cells = code_cells(NOTEBOOKS[name])
        first = ast.parse(cells[0].source)
        assert first.body and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in first.body)
        tagged = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
        assert tagged == [1], f"exactly one `parameters` cell, right after the imports; found at {tagged}"
        body = ast.parse(cells[1].source).body
        assert all(
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and is_literal(s.value)
            for s in body
        ), "parameters must be `name = literal`"
        assert "run_dir" in declared_parameters(NOTEBOOKS[name])

    def test_no_imports_after_the_first_cell(self, name):
        for cell in code_cells(NOTEBOOKS[name])[1:]:
            tree = ast.parse(cell.source)
            assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)), cell.source[:60]

    def test_logic_lives_in_weftlib(self, name):
        for cell in code_cells(NOTEBOOKS[name]):
            for node in ast.walk(ast.parse(cell.source)):
                assert not isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.While)
                ), f"{type(node).__name__} in: {cell.source[:60]}"
                assert not is_loop_in_disguise(node), f"a comprehension run for its side effects in: {cell.source[:60]}"

    def test_claims_are_asserted_and_recorded(self, name):
        source = "\n".join(c.source for c in code_cells(NOTEBOOKS[name]))
        tree = ast.parse(source)
        assert any(isinstance(n, ast.Assert) for n in ast.walk(tree)), "a notebook must assert its claims"
        assert f'record.Recorder("{name}", run_dir)' in source
        assert "rec.record(" in source

    def test_filter_passes_the_clean_file_through_unchanged(self, name):
        text = staged_text(NOTEBOOKS[name])
        assert nbstrip.strip(text) == text


def test_the_filter_is_declared_for_notebooks():
    assert "notebooks/*.ipynb filter=nbstrip" in (REPO / ".gitattributes").read_text()
    if IN_GIT:
        assert _git("check-attr", "filter", "notebooks/00_overview.ipynb").stdout.strip().endswith("nbstrip")


def test_strip_removes_what_lab_saves():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1)]
    nb.cells[0].execution_count = 1
    nb.cells[0].metadata.update({"tags": ["keep"], "execution": {"iopub.status.busy": "x"}})
    nb.metadata["widgets"] = {"state": {}}
    out = nbformat.reads(nbstrip.strip(nbformat.writes(nb)), as_version=4)
    assert out.cells[0].outputs == [] and out.cells[0].execution_count is None
    assert out.cells[0].metadata == {"tags": ["keep"]} and "widgets" not in out.metadata
    assert nbstrip.strip("not json") == "not json"  # noqa: B005 (the filter, not str.strip)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_lab_autosave_never_reaches_a_commit(tmp_path):
    """A scratch repository configured exactly as the Makefile does: outputs saved into a notebook show no
    diff, and after `git add` there is nothing to commit (the index blob is the clean notebook)."""
    command = re.search(r"^NBSTRIP := (.*)$", (REPO / "Makefile").read_text(), re.M).group(1)
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    shutil.copy(REPO / "scripts" / "nbstrip.py", repo / "scripts" / "nbstrip.py")
    shutil.copy(REPO / ".gitattributes", repo / ".gitattributes")
    shutil.copy(NOTEBOOKS["00_overview"], repo / "notebooks" / "00_overview.ipynb")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    import os

    env = {**os.environ, **env}
    for step in ("git init -q", command, "git add -A", "git commit -qm init"):
        assert subprocess.run(step, check=False, shell=True, cwd=repo, env=env, capture_output=True).returncode == 0, (
            step
        )
    saved = nbformat.read(repo / "notebooks" / "00_overview.ipynb", as_version=4)
    code = next(c for c in saved.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="autosaved\n")]
    code.execution_count = 7
    nbformat.write(saved, repo / "notebooks" / "00_overview.ipynb")
    assert "autosaved" in (repo / "notebooks" / "00_overview.ipynb").read_text()
    assert _git("diff", "--exit-code", cwd=repo, env=env).returncode == 0, "git sees the autosaved outputs"
    _git("add", "-A", cwd=repo, env=env)
    assert _git("status", "--porcelain", cwd=repo, env=env).stdout.strip() == "", "nothing to commit"
    blob = _git("show", ":notebooks/00_overview.ipynb", cwd=repo, env=env).stdout
    assert "autosaved" not in blob and blob == (NOTEBOOKS["00_overview"]).read_text(encoding="utf-8")


def _lab_contents_manager(root):
    """The contents manager as `make lab` configures it (lab/jupyter_server_config.py, read by traitlets' own
    config loader), rooted at `root`."""
    from jupyter_server.services.contents.filemanager import FileContentsManager
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("jupyter_server_config.py", path=str(REPO / "lab")).load_config()
    return FileContentsManager(root_dir=str(root), config=config)


KERNEL_LANGUAGE_INFO = {  # what an ipykernel reports about itself, which Lab writes into a notebook on save
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": "3.11.7",
}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_lab_save_with_a_kernels_metadata_leaves_git_clean(tmp_path):
    """A notebook opened and saved through jupyter_server's contents manager as `make lab` runs it, with the
    kernel's `language_info`, in a scratch repository set up as the Makefile sets it up: `git status` shows
    nothing; and a save with outputs too leaves nothing to commit."""
    command = re.search(r"^NBSTRIP := (.*)$", (REPO / "Makefile").read_text(), re.M).group(1)
    assert "--config=lab/jupyter_server_config.py" in (REPO / "Makefile").read_text(), "make lab skips the hook"
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    for name in ("scripts/nbstrip.py", ".gitattributes", ".gitignore", "notebooks/01_trace_natten.ipynb"):
        shutil.copy(REPO / name, repo / name)
    import os

    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for step in ("git init -q", command, "git add -A", "git commit -qm init"):
        assert subprocess.run(step, check=False, shell=True, cwd=repo, env=env, capture_output=True).returncode == 0
    contents, path = _lab_contents_manager(repo), "notebooks/01_trace_natten.ipynb"
    nb = contents.get(path)["content"]
    nb.metadata["language_info"] = dict(KERNEL_LANGUAGE_INFO)
    contents.save({"type": "notebook", "format": "json", "content": nb}, path)
    status = _git("status", "--porcelain", cwd=repo, env=env).stdout.strip()
    assert status == "", f"a Lab save dirtied git status: {status}"
    nb = contents.get(path)["content"]
    nb.metadata["language_info"] = dict(KERNEL_LANGUAGE_INFO)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="saved from Lab\n")]
    code.execution_count = 3
    contents.save({"type": "notebook", "format": "json", "content": nb}, path)
    assert "saved from Lab" in (repo / path).read_text(), "the working file keeps its outputs"
    _git("add", "-A", cwd=repo, env=env)
    assert _git("status", "--porcelain", cwd=repo, env=env).stdout.strip() == "", "a Lab save left something to commit"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_save_through_make_labs_server_leaves_git_status_clean_and_the_outputs_in_the_file(tmp_path):
    """The server `make lab` starts, its contents manager class and hooks as lab/jupyter_server_config.py sets
    them, in a scratch repository set up as the Makefile sets it up. A notebook is handed out with the kernel's
    `language_info` (so Lab finds nothing to change on open); saved with outputs (a different size from what
    git holds), `git status` is clean with no `git add` from anyone, and the outputs stay in the working file.
    A real edit still shows as modified."""
    import asyncio
    import os

    from traitlets.config.loader import PyFileConfigLoader

    command = re.search(r"^NBSTRIP := (.*)$", (REPO / "Makefile").read_text(), re.M).group(1)
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    for name in ("scripts/nbstrip.py", ".gitattributes", ".gitignore", "notebooks/05_gate_pairing.ipynb"):
        shutil.copy(REPO / name, repo / name)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for step in ("git init -q", command, "git add -A", "git commit -qm init"):
        assert subprocess.run(step, check=False, shell=True, cwd=repo, env=env, capture_output=True).returncode == 0
    config = PyFileConfigLoader("jupyter_server_config.py", path=str(REPO / "lab")).load_config()
    manager_class = config.ServerApp.contents_manager_class
    contents, path = manager_class(root_dir=str(repo), config=config), "notebooks/05_gate_pairing.ipynb"

    def status():
        return _git("status", "--porcelain", cwd=repo, env=env).stdout.strip()

    nb = asyncio.run(contents.get(path))["content"]
    assert nb.metadata["language_info"]["version"] == sys.version.split()[0], "Lab would set it: unsaved"
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code[:2], 1):  # two cells run, then saved
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran {i}\n")]
        cell.execution_count = i
    asyncio.run(contents.save({"type": "notebook", "format": "json", "content": nb}, path))
    assert "ran 2" in (repo / path).read_text(), "the working file keeps its outputs"
    assert status() == "", f"a save whose filtered content is unchanged left git status dirty: {status()}"

    nb.cells[0].source += "\nAn edit."
    asyncio.run(contents.save({"type": "notebook", "format": "json", "content": nb}, path))
    assert status() == "M notebooks/05_gate_pairing.ipynb", "a real edit must show as modified, unstaged"


def test_strip_keeps_only_the_languages_name():
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"}
    out = nbformat.reads(nbstrip.strip(nbformat.writes(nb)), as_version=4)
    assert out.metadata["language_info"] == {"name": "python"}


MAX_FUNCTION_LINES = 60  # a function a reader takes in at once; ruff bounds its statements (pyproject.toml)


def test_no_library_function_is_over_sixty_lines():
    """Every function of weftlib/ (the stand-ins' copies of outside code aside) fits the bound, docstring
    included: a longer one is several steps that want their own names."""
    long = []
    for path in sorted((REPO / "weftlib").rglob("*.py")):
        if {"pixal_host", "naf_hub"} & set(path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "functions over the bound:\n" + "\n".join(long)
