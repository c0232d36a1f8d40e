"""Profile resolution, mesh and secrets."""

import os
import pathlib

import pytest

from tunixkit import runtime


def test_profile_precedence(monkeypatch):
    monkeypatch.delenv(runtime.ENV_PROFILE, raising=False)
    auto = runtime.resolve(verbose=False)
    assert (auto.profile, auto.reason) == ("smoke", "automatic: cpu backend")
    monkeypatch.setenv(runtime.ENV_PROFILE, "full")
    assert runtime.resolve(verbose=False).profile == "full"
    assert runtime.resolve("smoke", verbose=False).profile == "smoke"  # argument beats env


def test_unknown_profile_lists_valid(monkeypatch):
    monkeypatch.setenv(runtime.ENV_PROFILE, "fast")
    with pytest.raises(
        ValueError, match=r"'fast' from \$TUNIXKIT_PROFILE; expected one of smoke, full"
    ):
        runtime.resolve(verbose=False)


def test_banner_says_which_and_why(capsys):
    runtime.resolve("smoke")
    out = capsys.readouterr().out
    assert "profile: SMOKE  (set by the PROFILE parameter)" in out and "cpu x 2" in out


def test_mesh_on_emulated_devices():
    mesh = runtime.make_mesh()
    assert dict(mesh.shape) == {"fsdp": 2, "tp": 1}
    assert dict(runtime.make_mesh((1, 2)).shape) == {"fsdp": 1, "tp": 2}
    with pytest.raises(ValueError, match="has 4 slots but JAX sees 2 devices"):
        runtime.make_mesh((2, 2))


def test_secret_lookup_order_and_never_printed(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TK_TEST_SECRET", raising=False)
    (tmp_path / ".env").write_text("# comment\nexport TK_TEST_SECRET='from-dotenv'\n")
    assert runtime.get_secret("TK_TEST_SECRET") == "from-dotenv"
    monkeypatch.setenv("TK_TEST_SECRET", "from-env")
    assert runtime.get_secret("TK_TEST_SECRET") == "from-env"
    assert "from-" not in capsys.readouterr().out


def test_missing_secret_names_where_to_add(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TK_NOPE", raising=False)
    assert runtime.get_secret("TK_NOPE", required=False) is None
    with pytest.raises(runtime.MissingSecretError) as e:
        runtime.get_secret("TK_NOPE", purpose="a test")
    msg = str(e.value)
    assert "'TK_NOPE'" in msg and "Kaggle: Add-ons > Secrets" in msg and "Colab:" in msg


def test_secret_client_failure_is_reported_not_taken_for_unset(monkeypatch, tmp_path, capsys):
    """On Kaggle, a secrets client that fails (here: not importable) is said so, then the
    environment is used; a secret the client simply lacks is quietly "not set"."""
    import sys
    import types

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.setenv("TK_FROM_ENV", "env-value")
    monkeypatch.setitem(sys.modules, "kaggle_secrets", None)  # import fails
    assert runtime.get_secret("TK_FROM_ENV") == "env-value"
    out = capsys.readouterr().out
    assert "the kaggle secrets client failed for 'TK_FROM_ENV'" in out and "env-value" not in out

    class NotFound(Exception):
        pass

    class Client:
        def get_secret(self, name):
            raise NotFound(f"No user secrets exist for label {name}")

    monkeypatch.setitem(
        sys.modules, "kaggle_secrets", types.SimpleNamespace(UserSecretsClient=Client)
    )
    assert runtime.get_secret("TK_NOPE_2", required=False) is None
    assert capsys.readouterr().out == ""


def test_a_kaggle_session_without_accelerator_is_warned_loudly(monkeypatch):
    import warnings

    from tunixkit import runtime

    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.delenv("TUNIXKIT_PROFILE", raising=False)
    with pytest.warns(UserWarning, match=r"NO ACCELERATOR: this kaggle session .* TPU v5e-8"):
        assert runtime.resolve(verbose=False).profile == "smoke"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # chosen on purpose: no warning
        assert runtime.resolve("smoke", verbose=False).profile == "smoke"


@pytest.mark.parametrize("preset", ["SFT", "GRPO", "DPO", "Distill", "Pipeline", "Agentic"])
def test_one_chip_gets_every_training_notebooks_smaller_preset(preset):
    """Colab's one chip (the full profile on one device) gets each training notebook's one-chip
    preset: fewer rows per step than Kaggle's eight chips, the model the competition allows."""
    import dataclasses

    from tunixkit import recipes

    cls = getattr(recipes, preset)
    chip = runtime.Runtime(
        profile="full",
        reason="test",
        backend="tpu",
        environment="colab",
        device_count=1,
        process_count=1,
    )
    eight = dataclasses.replace(chip, device_count=8, environment="kaggle")
    one, full = cls.for_runtime(chip), cls.for_runtime(eight)
    assert one == cls.one_chip() and full == cls.full() and one != full
    rows = [getattr(r, "batch_size", None) or r.grpo.batch_size for r in (one, full)]
    assert rows[0] < rows[1], rows
    if hasattr(one, "grpo"):  # the rows of a GRPO update: its micro-batch's prompts x G
        rows = [
            (r.grpo.micro_batch_size or r.grpo.batch_size) * r.grpo.num_generations
            for r in (one, full)
        ]
        assert rows[0] < rows[1], rows
    assert getattr(one, "model_id", getattr(one, "student_id", None)) == getattr(
        full, "model_id", getattr(full, "student_id", None)
    )


_CACHED = """
import sys, jax, jax.numpy as jnp
from tunixkit import recipes
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None
)
_, _, out, _ = recipes.start(
    recipes.Quickstart, "smoke", sys.argv[1], verbose=False, rehearsal=sys.argv[2] == "rehearsal",
    compile_cache=None if sys.argv[3] == "default" else False,
)
jax.jit(lambda x: jnp.sin(x) @ x.T + 41.0)(jnp.ones((16, 16))).block_until_ready()
print(out, jax.config.jax_compilation_cache_dir, len(hits))
"""


def test_a_notebook_keeps_its_compiled_programs_for_the_next_run(tmp_path):
    """recipes.start points JAX's persistent compilation cache at OUTPUT_DIR/jax_cache (not the
    rehearsal's folder, which is made anew): the run after a rehearsal, or a later session that
    RESUME_FROM copies the folder to, loads the programs instead of compiling them again.
    COMPILE_CACHE = False turns it off; $JAX_COMPILATION_CACHE_DIR (CI's shared folder) wins."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"

    def run(*args, env=env):
        said = subprocess.run(
            [sys.executable, "-c", _CACHED, str(tmp_path / "out"), *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return pathlib.Path(said[0]), said[1], int(said[2])

    out, folder, hits = run("rehearsal", "default")
    cache = tmp_path / "out" / "jax_cache"
    assert out == tmp_path / "out" / "rehearsal" and folder == str(cache) and hits == 0
    assert list(cache.iterdir()), "nothing was kept"
    out, folder, hits = run("run", "default")  # the real run after it: loaded, not compiled
    assert out == tmp_path / "out" and folder == str(cache) and hits >= 1
    assert run("run", "off")[1:] == ("None", 0)
    shared = tmp_path / "shared"
    assert run("run", "default", env=env | {"JAX_COMPILATION_CACHE_DIR": str(shared)})[1] == str(
        shared
    )
