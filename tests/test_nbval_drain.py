"""nbval keeps a long cell's output (``tests/nbval_drain.py``, which ``notebooks/conftest.py``
imports): a cell whose progress bar sends some 30,000 IOPub messages fails under plain nbval
("Timeout of 5 seconds exceeded waiting for output", the next cell xfailed) and passes with it."""

import os
import pathlib
import subprocess
import sys

import nbformat

HERE = pathlib.Path(__file__).resolve().parent
FLOOD = """from tqdm.auto import tqdm
bar = tqdm(total=10000)
for i in range(10000):
    bar.set_postfix({"loss": i / 10000})
    bar.update(1)
bar.close()"""


def _nbval(folder: pathlib.Path, *plugin: str) -> subprocess.CompletedProcess:
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(FLOOD), nbformat.v4.new_code_cell("print('after')")]
    )
    nbformat.write(nb, folder / "flood.ipynb")
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--nbval-lax",
            "--nbval-current-env",
            *plugin,
            "--rootdir",
            str(folder),
            str(folder / "flood.ipynb"),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_cell_with_thousands_of_messages_passes_with_the_drain(tmp_path):
    plain = _nbval(tmp_path)
    assert plain.returncode != 0 and "exceeded waiting for output" in plain.stdout, plain.stdout
    drained = _nbval(tmp_path, "-p", "nbval_drain")
    assert drained.returncode == 0 and "2 passed" in drained.stdout, drained.stdout
