"""API drift: every tunix/qwix symbol tunixkit calls exists with the parameters it passes."""

from tunixkit import doctor


def test_installed_tunix_offers_every_api():
    assert doctor.check() == []


def test_doctor_reports_a_missing_parameter_and_symbol(monkeypatch, capsys):
    monkeypatch.setattr(
        doctor,
        "REQUIRED_API",
        (
            ("tunix.generate.sampler", "CacheConfig", ("cache_size", "no_such_param")),
            ("tunix.rl.rl_cluster", "RLEngine", ()),  # upstream main's rename; absent in 0.1.7
        ),
    )
    problems = doctor.check()
    assert problems[0] == "tunix.generate.sampler.CacheConfig: no parameter(s) no_such_param"
    assert problems[1].startswith("tunix.rl.rl_cluster.RLEngine: missing")
    assert (
        doctor.main() == 1
        and "pip install --no-deps 'google-tunix==0.1.7'" in capsys.readouterr().out
    )
