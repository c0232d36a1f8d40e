"""Notebooks run from another directory with the network blocked; full without credentials fails fast."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUARD = textwrap.dedent("""
    import socket
    _real_connect = socket.socket.connect
    def _connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if self.family == socket.AF_UNIX or str(host) in ("127.0.0.1", "::1", "localhost"):
            return _real_connect(self, address)
        raise OSError(f"network blocked by test: {address}")
    socket.socket.connect = _connect
""")


@pytest.fixture
def blocked_env(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GUARD)
    env = dict(
        os.environ,
        PYTHONPATH=f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="--xla_force_host_platform_device_count=1",
    )
    for k in ("HF_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN", "TUNIXKIT_PROFILE"):
        env.pop(k, None)
    return env


def test_guard_blocks_network(blocked_env):
    code = "import socket; socket.create_connection(('93.184.216.34', 80), timeout=2)"
    res = subprocess.run(
        [sys.executable, "-c", code], env=blocked_env, capture_output=True, text=True
    )
    assert res.returncode != 0 and "network blocked by test" in res.stderr


def _papermill(tmp_path, env, *params):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "papermill",
        str(ROOT / "notebooks" / "00_quickstart.ipynb"),
        str(tmp_path / "executed.ipynb"),
        "-p",
        "OUTPUT_DIR",
        str(out),
        *params,
    ]
    return subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    ), out


def test_quickstart_smoke_offline_from_another_directory(tmp_path, blocked_env):
    res, out = _papermill(tmp_path, blocked_env, "-p", "PROFILE", "smoke")
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["profile"] == "smoke" and summary["questions"] == 4


def test_full_profile_without_credentials_fails_fast(tmp_path, blocked_env):
    res, _ = _papermill(tmp_path, blocked_env, "-p", "PROFILE", "full", "-p", "SOURCE", "hf")
    assert res.returncode != 0
    err = res.stderr + res.stdout
    assert "MissingSecretError" in err and "HF_TOKEN" in err
    assert "Kaggle: Add-ons > Secrets" in err and "Colab:" in err


def test_every_notebook_opens_with_the_same_install_cell():
    """The install cell runs before tunixkit can be imported, so each notebook carries a copy; the
    copies must not drift (the Kaggle replay runs only 01's and 02's)."""

    def install_cell(path: pathlib.Path) -> str:
        cells = path.read_text(encoding="utf-8").split("\n# %%")
        return next(c for c in cells if "# Install: makes `import tunixkit` work" in c)

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    cells = {p.name: install_cell(p) for p in notebooks}
    first = cells[notebooks[0].name]
    assert len(cells) >= 8 and "install_in_kernel.py" in first
    # the cell hands the work to install_in_kernel.py, which runs the pinned setup script
    installer = (ROOT / "install_in_kernel.py").read_text(encoding="utf-8")
    assert "setup_notebook_tpu_single_host.sh" in installer
    assert [name for name, cell in cells.items() if cell != first] == []
