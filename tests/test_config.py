"""Every invalid config: exit status 2 and `file:line:col: error: key: message`, no traceback."""
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelgen.cli import main
from kernelgen.api import load_config
from kernelgen.errors import ConfigError

BAD = sorted((Path(__file__).parent / "data" / "bad").glob("*.yaml"))


def _expected(path: Path) -> str:
    """The file's `# expect: LINE:COL: key: message` as printed: `LINE:COL: error: key: message`."""
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), path
    position, message = first[len("# expect: "):].split(": ", 1)
    return f"{position}: error: {message}"


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_config_is_reported_with_position(path):
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    lines = [str(p) for p in caught.value.problems]
    want = f"{path}:{_expected(path)}"
    assert any(line.startswith(want) for line in lines), f"wanted {want!r} in {lines}"


@pytest.mark.parametrize("path", BAD[:4], ids=[p.stem for p in BAD[:4]])
def test_bad_config_exits_2_through_the_cli(path):
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2
    assert _expected(path) in result.output
    assert "Traceback" not in result.output


def test_every_problem_is_reported_at_once(tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text("name: many\ninput: {shape: [1, 8, 8, 4]}\nops:\n"
                    "  - conv2d: {out_channels: 0, stride: 0, dilation: [1, 0]}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    keys = [p.key for p in caught.value.problems]
    assert keys == ["ops[0].conv2d.out_channels", "ops[0].conv2d.stride", "ops[0].conv2d.dilation"]


def test_missing_file():
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config("no/such/file.yaml")


def test_defaults_and_pair_forms(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("name: ok\ninput: {shape: [1, 9, 10, 3]}\nops:\n"
                    "  - conv2d: {out_channels: 5, kernel: [3, 1], stride: [2, 1], pad: [1, 0, 0, 2]}\n"
                    "  - conv2d: {out_channels: 4, kernel: 3, pad: same}\n")
    config = load_config(path)
    first, second = config.ops
    assert first.kernel == (3, 1) and first.stride == (2, 1) and first.pad == (1, 0, 0, 2)
    assert second.pad == (1, 1, 1, 1)
    assert config.input_layout.name == "NHWC" and first.filter_layout.name == "OIHW"
    assert config.schedule.k_block == 32 and config.schedule.h_block == 8
    assert config.targets == ("c",)


def test_a_terminal_gets_the_offending_line_and_a_caret_under_the_column(monkeypatch):
    """Editors and CI annotators parse `file:line:col: error: key: message`; a person at a terminal also sees
    the line, with the caret under the column the position names."""
    from kernelgen.cli import common as cli
    from kernelgen.config.diagnostics import render

    path = Path(__file__).parent / "data" / "bad" / "zero_stride.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (problem,) = caught.value.problems
    line, caret = render(problem, with_source=True).splitlines()[1:]
    source = path.read_text().splitlines()[problem.line - 1]
    assert line == f"{problem.line:>5} | {source}"
    assert caret.index("^") == line.index(" | ") + 3 + problem.column - 1 and caret.count("^") == 1
    assert source[problem.column - 1:].startswith("0")  # the caret sits under the offending value: stride: 0
    assert render(problem, with_source=False) == str(problem) == f"{path}:{_expected(path)}"
    monkeypatch.setattr(cli.sys.stderr, "isatty", lambda: True, raising=False)
    shown = []
    monkeypatch.setattr(cli.click, "echo", lambda text="", err=False: shown.append(text))
    cli.echo_problems(caught.value)
    assert shown == [render(problem, with_source=True)]
    # A config given as text has no file to quote: the one line alone.
    with pytest.raises(ConfigError) as caught:
        load_config("name: t\ninput: {shape: [1, 8, 8, 4]}\nops: [{conv2d: {out_channels: 0}}]\n")
    assert render(caught.value.problems[0], with_source=True) == str(caught.value.problems[0])
