"""The distribution: a wheel installed into a fresh virtual environment runs the CLI from anywhere."""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import venv
import zipfile

import pytest
from conftest import REPO


@pytest.mark.slow
def test_wheel_installs_and_runs_from_another_directory(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist,
                    REPO], check=True, timeout=300)
    (wheel,) = dist.glob("hetero_dse-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hetero_dse/_data/boards/vu9p.yaml" in names
    assert "hetero_dse/_data/boards/board.schema.json" in names
    assert any(n.startswith("cost_models/") for n in names) and any(n.startswith("gpu_cpu/") for n in names)

    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], check=True, timeout=300)
    # Dependencies (TVM, torch...) come from the test environment's site-packages, after the fresh venv's own,
    # so the project itself can only be imported from the wheel just installed.
    fresh_site = next((env_dir / "lib").glob("python*/site-packages"))
    (fresh_site / "zz_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([py, "-c", "import hetero_dse; print(hetero_dse.__file__)"], cwd=elsewhere,
                           capture_output=True, text=True, check=True, timeout=120).stdout
    assert str(fresh_site) in where

    exe = env_dir / "bin" / "hetero_dse"
    boards = subprocess.run([exe, "boards"], cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert boards.returncode == 0, boards.stderr
    assert "xcu280-fsvh2892-2L-e" in boards.stdout
    analysis = subprocess.run([exe, "analyze", "--op", "gemm", "--param", "M=64", "--json"], cwd=elsewhere,
                              capture_output=True, text=True, timeout=120)
    assert analysis.returncode == 0, analysis.stderr
    assert json.loads(analysis.stdout)[0]["flops"] == 2 * 64 * 512 * 512

    # the HLS templates and the C-simulation headers travel in the wheel: explore + csim from elsewhere
    assert "hetero_dse/_data/hls_templates/kernel.cpp.j2" in names
    assert "hetero_dse/_data/hls_templates/include/hls_streamofblocks.h" in names
    if shutil.which("g++"):
        run = subprocess.run([exe, "explore", "--op", "gemv", "--shape", "small:s1", "--board", "vu9p", "--out", "o",
                              "--csim"], cwd=elsewhere, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        report = json.loads((elsewhere / "o" / "report.json").read_text())
        assert report["explorations"][0]["csim"]["passed"] is True
