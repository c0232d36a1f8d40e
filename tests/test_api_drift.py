"""API drift: every tunix/qwix name tunixkit and its notebooks use exists with the parameters they
pass, the doctor's list misses none of them, and its report says what to install."""

import pathlib

from tunixkit.tools import deps, doctor

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_installed_tunix_offers_every_api():
    problems, unverifiable = doctor.check()
    assert problems == []
    # the qwix calls hide their parameters behind **kwargs: reported as such, never as verified
    assert any(line.startswith("qwix.apply_lora_to_model: takes **kwargs") for line in unverifiable)


def test_doctor_checks_every_tunix_name_the_code_uses():
    sources = [*ROOT.glob("tunixkit/*.py"), *ROOT.glob("notebooks/[0-9]*.py")]
    used = doctor.scan(sources)
    assert ("tunix.rl.grpo.grpo_learner", "GRPOLearner") in used  # the scan does see the code
    checked = {(module, path.split(".")[0]) for module, path, _ in doctor.required()}
    assert used - checked == set(), "add these to tunixkit.tools.doctor.REQUIRED_API"


def test_doctor_reports_missing_parameter_symbol_and_kwargs(monkeypatch, capsys):
    monkeypatch.setattr(
        doctor,
        "REQUIRED_API",
        (
            ("tunix.generate.sampler", "CacheConfig", ("cache_size", "no_such_param")),
            ("tunix.rl.rl_cluster", "RLEngine", ()),  # upstream main's rename; absent in 0.1.7
            ("qwix", "LoraProvider", ("module_path", "rank")),
        ),
    )
    monkeypatch.setattr(doctor, "required", lambda: list(doctor.REQUIRED_API))
    problems, unverifiable = doctor.check()
    assert problems[0] == "tunix.generate.sampler.CacheConfig: no parameter(s) no_such_param"
    assert problems[1].startswith("tunix.rl.rl_cluster.RLEngine: missing")
    assert unverifiable == [
        "qwix.LoraProvider: takes **kwargs, so module_path, rank cannot be checked"
    ]
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "0 of 3 APIs verified" in out
    assert "pip install --no-deps 'google-tunix==0.1.7'" in out


def test_missing_tunix_dependencies_get_one_pinned_pip_line(monkeypatch, capsys):
    real = deps.md.version

    def version(name):
        if name in ("google-metrax", "jaxtyping"):
            raise deps.md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(deps.md, "version", version)
    assert set(deps.missing_dependencies()) == {"google-metrax", "jaxtyping"}
    line = deps.pip_line(deps.missing_dependencies(), ROOT / "requirements.txt")
    assert (
        line.startswith("pip install --no-deps ")
        and "google_metrax==" in line
        and "jaxtyping==" in line
    )
    assert deps.main(["--pins", str(ROOT / "requirements.txt")]) == 0
    assert capsys.readouterr().out.strip() == line
    # the doctor names them too, with the same line, and fails
    monkeypatch.setattr(doctor, "check", lambda: ([], []))
    assert doctor.main(["--pins", str(ROOT / "requirements.txt")]) == 1
    assert f"Fix: {line}" in capsys.readouterr().out
