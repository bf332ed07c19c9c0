"""The build files agree with each other, so a user's install matches CI's."""
import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pyproject_requirements():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        reqs += extra
    return {re.split(r"[<>=!~ \[]", r, 1)[0].lower(): r.replace(" ", "") for r in reqs}


def _environment_requirements():
    out = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("dependencies:", 1)[1].splitlines():
        m = re.match(r"\s+- ([A-Za-z0-9_.\-]+)(.*)$", line)
        if m and not line.strip().startswith("- -e") and m.group(1) not in ("python", "pip"):
            out[m.group(1).lower()] = (m.group(1) + m.group(2)).replace(" ", "")
    return out


def test_environment_yml_lists_the_same_pins_as_pyproject():
    assert _environment_requirements() == _pyproject_requirements()


def test_pins_that_matter():
    reqs = _pyproject_requirements()
    assert reqs["triton"] == "triton==3.8.0"
    assert reqs["triton-utlx"] == "triton-utlx==3.8.0.post16"
    assert reqs["torch"] == "torch==2.13.0"   # an unpinned torch pulls a multi-GB CUDA build


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "    make test\n" in readme and "    make demo\n" in readme
    ci = [l for l in (ROOT / ".ci/run").read_text().splitlines() if l and not l.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]


def test_the_version_is_said_once_in_the_package_and_matches_pyproject():
    import tlx_workbench
    from tlx_workbench._version import __version__
    pyproject = tomllib.loads((pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert tlx_workbench.__version__ == __version__ == pyproject["project"]["version"]
