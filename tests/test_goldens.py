"""out/ holds exactly what `kernelgen build` generates for configs/*.yaml, but the compiled SPIR-V modules
(they depend on the installed glslang's version, so they are never goldens)."""
import shutil

import pytest

from click.testing import CliRunner

from kernelgen.cli import main


def _configs(repo):
    return sorted(str(p) for p in (repo / "configs").glob("*.yaml"))


@pytest.mark.slow  # every config built, SPIR-V compiled; test_check_passes_on_goldens renders the same text
def test_goldens_are_up_to_date(repo, tmp_path):
    result = CliRunner().invoke(main, ["build", *_configs(repo), "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".spv")
    if shutil.which("glslangValidator"):  # the vulkan configs' modules beside their sources
        assert any(tmp_path.rglob("*.spv"))
    golden = sorted(p.relative_to(repo / "out") for p in (repo / "out").rglob("*") if p.is_file())
    assert generated == golden
    for rel in generated:
        assert (tmp_path / rel).read_bytes() == (repo / "out" / rel).read_bytes(), rel


def test_check_passes_on_goldens(repo):
    result = CliRunner().invoke(main, ["check", *_configs(repo), "--golden", str(repo / "out")])
    assert result.exit_code == 0, result.output


def _one_config(repo, tmp_path):
    """seed000_3x3's config and a copy of its goldens alone: what check and --update do to one config's files is
    what they do to each (test_check_passes_on_goldens covers them all), at a 24th of the rendering."""
    golden = tmp_path / "out"
    shutil.copytree(repo / "out" / "seed000_3x3", golden / "seed000_3x3")
    return [str(repo / "configs" / "seed000_3x3.yaml")], golden


def test_check_fails_with_a_diff_when_a_golden_is_edited(repo, tmp_path):
    configs, golden = _one_config(repo, tmp_path)
    victim = golden / "seed000_3x3" / "c" / "seed000_3x3.c"
    text = victim.read_text()
    assert "KG_FMA(a0_0, x0[ch], w0);" in text  # the micro-kernel's first multiply-add
    victim.write_text(text.replace("KG_FMA(a0_0, x0[ch], w0);", "KG_FMA(a0_0, x0[ch], w1);", 1))
    result = CliRunner().invoke(main, ["check", *configs, "--golden", str(golden)])
    assert result.exit_code == 1
    assert "--- " in result.output and "+++ " in result.output
    assert "KG_FMA(a0_0, x0[ch], w1);" in result.output
    assert "stale: " in result.output and "seed000_3x3" in result.output and "target c" in result.output
    # --update repairs it, after which check is clean.
    assert CliRunner().invoke(main, ["check", *configs, "--golden", str(golden), "--update"]).exit_code == 0
    assert CliRunner().invoke(main, ["check", *configs, "--golden", str(golden)]).exit_code == 0


def test_check_reports_orphans_and_update_removes_them(repo, tmp_path):
    """A renamed config leaves its old folder behind: check names every file no config produces (exit 1);
    --update deletes them and the folders they leave empty."""
    configs, golden = _one_config(repo, tmp_path)
    (golden / "old_name" / "c").mkdir(parents=True)
    (golden / "old_name" / "c" / "old_name.c").write_text("/* from a config since renamed */\n")
    (golden / "seed000_3x3" / "vulkan").mkdir(exist_ok=True)
    (golden / "seed000_3x3" / "vulkan" / "seed000_3x3.op1.spv").write_bytes(b"\x03\x02\x23\x07")  # not a golden
    result = CliRunner().invoke(main, ["check", *configs, "--golden", str(golden)])
    assert result.exit_code == 1
    assert f"orphan: {golden / 'old_name' / 'c' / 'old_name.c'} (no config produces it)" in result.output
    assert ".spv" not in result.output
    assert CliRunner().invoke(main, ["check", *configs, "--golden", str(golden), "--update"]).exit_code == 0
    assert not (golden / "old_name").exists() and (golden / "seed000_3x3" / "c").is_dir()
    assert CliRunner().invoke(main, ["check", *configs, "--golden", str(golden)]).exit_code == 0
