"""Every derived file is what its generator writes: `python -m tools.generate --check`, as CI runs it."""

from __future__ import annotations

from tools import generate


def test_no_derived_file_differs_from_what_the_one_generator_writes(capsys):
    assert generate.main(["--check"]) == 0, capsys.readouterr().err


def test_the_check_names_a_derived_file_that_drifted(tmp_path, monkeypatch, capsys):
    drifted = tmp_path / "derived.txt"
    drifted.write_text("edited by hand\n")
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    monkeypatch.setattr(generate, "GENERATORS", (lambda: {drifted: "as generated\n"},))
    assert generate.main(["--check"]) == 1
    assert "derived.txt differs from what python -m tools.generate writes" in capsys.readouterr().err
    assert drifted.read_text() == "edited by hand\n"  # --check writes nothing
