"""Shipped names (``h100-sxm``, ``resnet50``, ``arch_configs/hfp8-64chip.toml``) resolve from any
folder, in the library and the CLI, and the installed package carries every shipped file
(issue 21, item 1 and 3)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.arch import ConfigError, build_system, load_system
from accelsim.cli import main
from accelsim.paths import REPO_ROOT, SHIPPED, resolve_input, shipped_files, shipped_names
from accelsim.workload import load_workload

EVERY_SHIPPED = [p.as_posix() for p in shipped_files()]


def test_every_shipped_folder_has_files():
    folders = {Path(p).parts[0] for p in EVERY_SHIPPED}
    assert folders == set(SHIPPED)
    assert "arch_configs/h100-sxm.toml" in EVERY_SHIPPED
    assert "workloads/resnet50.toml" in EVERY_SHIPPED


def test_library_loaders_take_shipped_names_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert build_system("h100-sxm").name == "h100-sxm"
    assert load_system("a100-sxm").name == "a100-sxm"
    assert load_workload("resnet50").name == load_workload(
        REPO_ROOT / "workloads" / "resnet50.toml").name
    # the defaults some commands name as relative paths
    assert resolve_input("arch_configs/hfp8-64chip.toml", "system").is_file()
    assert resolve_input("workloads/resnet50.toml", "workload").is_file()


def test_missing_name_is_a_config_error_in_the_library(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="file not found"):
        load_system("no-such-system")


def test_a_file_in_the_current_folder_wins_over_the_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "arch_configs").mkdir()
    text = (REPO_ROOT / "arch_configs" / "h100-sxm.toml").read_text()
    mine = tmp_path / "arch_configs" / "h100-sxm.toml"
    mine.write_text(text)
    assert resolve_input("h100-sxm", "system") == mine


@pytest.mark.parametrize("argv", [
    ["check-config", "h100-sxm"],
    ["gemm", "--system", "h100-sxm", "--m", "256", "--n", "256", "--k", "256", "--scheme", "bf16"],
    ["predict", "--system", "a100-sxm", "--workload", "resnet50", "--batch", "8",
     "--scheme", "fp16"],
])
def test_cli_takes_shipped_names_from_another_folder(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip()


def test_check_config_unknown_name_lists_shipped_names(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check-config", "h100-sxn"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "h100-sxm" in err and "h100-sxn" in err
    assert shipped_names("system") == sorted(Path(p).stem for p in EVERY_SHIPPED
                                             if p.startswith("arch_configs/"))


@pytest.fixture(scope="module")
def built_package(tmp_path_factory) -> Path:
    """setup.py's build_py run on a copy of the sources: the tree that goes into the wheel."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", *SHIPPED):
        p = REPO_ROOT / name
        (shutil.copytree if p.is_dir() else shutil.copy)(p, src / name)
    shutil.copytree(REPO_ROOT / "accelsim", src / "accelsim",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("build")
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)],
                          cwd=src, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def test_build_ships_every_config_and_workload(built_package):
    data = built_package / "accelsim" / "data"
    for rel in EVERY_SHIPPED:
        assert (data / rel).read_bytes() == (REPO_ROOT / rel).read_bytes(), rel
    assert (built_package / "accelsim" / "py.typed").is_file()


def test_built_package_resolves_names_without_the_checkout(built_package, tmp_path):
    """The installed layout: no arch_configs/ beside the package, only accelsim/data/."""
    code = ("from accelsim.paths import resolve_input, PACKAGE_DATA; "
            "p = resolve_input('h100-sxm', 'system'); w = resolve_input('resnet50', 'workload'); "
            "assert p.is_relative_to(PACKAGE_DATA) and w.is_relative_to(PACKAGE_DATA), (p, w); "
            "print(p.parent.name, w.parent.name)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(built_package),
                                                      "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["arch_configs", "workloads"]


def test_a_file_in_the_current_folder_s_arch_configs_displays_as_shipped(tmp_path, monkeypatch):
    """Names resolve in the current folder first (a fresh clone with a non-editable install):
    a report records such a file as arch_configs/<name>.toml, not by its absolute path."""
    from accelsim.paths import display_path

    (tmp_path / "arch_configs").mkdir()
    f = tmp_path / "arch_configs" / "mine.toml"
    f.write_text("")
    monkeypatch.chdir(tmp_path)
    assert display_path(f) == "arch_configs/mine.toml"
    other = tmp_path / "elsewhere.toml"
    other.write_text("")
    assert display_path(other) == str(other)
