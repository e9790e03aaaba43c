"""Hostile configs through the real command line: exit 0 or a clean exit 2, never a traceback,
in bounded time and memory, and nothing written by a build that fails.

Each example breaks a valid config (tests/strategies.py): an extreme number, a dropped or
unknown key, a broken layout, a reserved or oversized name, a bad target list, YAML
anchors, merge keys, recursion and deep nesting, NUL and non-UTF-8 bytes.
"""
from __future__ import annotations

import re
import resource
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from conftest import requires_tool, time_limit
from strategies import fuzz_settings, hostile_texts

from kernelgen.cli import main

SECONDS_PER_COMMAND = 20  # plan and build of a small config take well under a second
MAX_RSS_BYTES = 3 << 30  # what one command may add; numpy arrays sized by a huge dimension blow past it
POSITION = re.compile(r"^\S.*:\d+:\d+: ", re.MULTILINE)
STATUS, CLEAR_REFS = Path("/proc/self/status"), Path("/proc/self/clear_refs")


def _status_bytes(field: str) -> int:
    line = next(line for line in STATUS.read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024  # "VmHWM:  123456 kB"


def _peak_growth(command):
    """Run `command`; its result and the most resident memory it added to what the process held before it.
    On Linux "5" in /proc/self/clear_refs sets the peak (VmHWM) to the current RSS, so earlier tests' high-water
    marks (a bench triad sized to a 480 MiB L3, say) do not count against this command. Elsewhere: the process's
    lifetime peak, from zero."""
    try:
        CLEAR_REFS.write_text("5")
        before = _status_bytes("VmRSS")
    except OSError:
        return command(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = command()
    return result, _status_bytes("VmHWM") - before


def _run(args: list[str]):
    with time_limit(SECONDS_PER_COMMAND):
        result, grown = _peak_growth(lambda: CliRunner().invoke(main, args))
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{args[0]}: {type(result.exception).__name__}: {result.exception}\n{result.output}"
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), f"{args[0]} exited {result.exit_code}:\n{result.output}"
    if result.exit_code == 2:
        assert POSITION.search(result.output), f"{args[0]}: exit 2 without file:line:col:\n{result.output}"
    assert grown < MAX_RSS_BYTES, f"{args[0]} added {grown >> 20} MiB at its peak"
    return result


@pytest.mark.slow  # 250 plans and builds; test_hostile_inputs.py holds the hostile cases found, one by one
@fuzz_settings(ci_examples=250)
@given(raw=hostile_texts())
def test_hostile_configs_end_in_exit_0_or_a_clean_exit_2(raw, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    path = folder / "hostile.yaml"
    path.write_bytes(raw)
    planned = _run(["plan", str(path)])
    out = folder / "out"
    built = _run(["build", str(path), "-o", str(out)])
    if built.exit_code == 2:
        assert not out.exists() or not any(out.rglob("*")), "a failed build left files behind"
    assert (planned.exit_code == 2) <= (built.exit_code == 2), "build accepted what plan rejected"


# ---------------------------------------------------------------- issue 32: where errors point, hostile ONNX convs

import yaml  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import valid_configs  # noqa: E402

from kernelgen.config.schema_errors import key_text  # noqa: E402
from kernelgen.config.yamlmarks import load  # noqa: E402

ERROR = re.compile(r"^\S+?:(\d+):(\d+): error: (\S+): (.*)$", re.MULTILINE)
KEYED = re.compile(r"^(vulkan|opencl|hvx|input|output|quant|schedule|ops\[\d+\])[\w.\[\]]*: ")
HOSTILE_OPTIONS = {
    "vulkan": {"wg_size": [[64, 64, 1], [0, 1, 1], [1, 1, 1]], "ivc_tile": [[1, 1, 3], [64, 64, 64], [1, 1, 8]],
               "wg_tile": [[1, 1, 4], [3, 3, 12]], "wide_store": [True], "device": ["mali-valhall", "rdna2"]},
    "opencl": {"tile": [[8, 8, 16], [0, 1, 1], [1, 1, 1]], "local_size": [[64, 32], [1]], "half_arithmetic": [True],
               "variant": ["texture", "buffer"], "device": ["adreno-7xx", "pocl-cpu"]},
}


@st.composite
def _options_texts(draw):
    target = draw(st.sampled_from(sorted(HOSTILE_OPTIONS)))
    data = draw(valid_configs(max_side=8, max_channels=24, chain=2, target=target)).data
    keys = draw(st.lists(st.sampled_from(sorted(HOSTILE_OPTIONS[target])), min_size=1, max_size=3, unique=True))
    data[target] = {key: draw(st.sampled_from(HOSTILE_OPTIONS[target][key])) for key in keys}
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


@pytest.mark.slow  # 40 builds for every target; test_error_places.py holds the places one by one
@fuzz_settings(ci_examples=40)
@given(text=_options_texts())
def test_each_error_is_at_its_own_key_in_the_file(text, tmp_path_factory):
    """Issue 32 item 4: an error names a key the file has (or the block it belongs in), at that key's value, and
    the message does not start with a key again (`vulkan: vulkan.wide_store: ...` pointed at the block's first
    line; `vulkan: ops[0]: ...` at 1:1)."""
    folder = tmp_path_factory.mktemp("places")
    path = folder / "places.yaml"
    path.write_text(text)
    result = _run(["build", str(path), "-o", str(folder / "out")])
    marks = {key_text(k): (m.line, m.column) for k, m in load(text).value_marks.items() if k}
    for line, column, key, message in ERROR.findall(result.output):
        assert not KEYED.match(message), f"the key twice: {key}: {message}"
        parent = key.rsplit(".", 1)[0]
        assert key in marks or parent in marks, f"{key} is not in the file:\n{text}\n{result.output}"
        assert (int(line), int(column)) == marks.get(key, marks.get(parent)), (key, line, column)


@st.composite
def _hostile_convs(draw):
    """A Conv node's weights and attributes, each valid or broken as a hostile exporter might write it."""
    c = draw(st.integers(1, 6))
    group = draw(st.sampled_from([1, 1, 2, 3, c, 0, -1, 2 ** 40]))
    per_group = draw(st.sampled_from([max(c // max(group, 1), 1), c, 5]))
    out = draw(st.integers(1, 6)) * (abs(group) if 0 < abs(group) < 8 else 1)
    k = draw(st.integers(1, 4))
    attrs = {"group": group}
    for name, size, values in (("strides", 2, [1, 2, 0, -1]), ("dilations", 2, [1, 2, 0]),
                               ("pads", 4, [0, 1, 2, -1]), ("kernel_shape", 2, [k, k + 2])):
        if draw(st.booleans()):
            attrs[name] = [draw(st.sampled_from(values)) for _ in range(draw(st.sampled_from([size, size, 1])))]
    bias = draw(st.sampled_from([None, [out], [out + 1]]))
    return dict(weight=[out, per_group, k, k], channels=c, size=draw(st.integers(1, 6)), bias=bias, **attrs)


@fuzz_settings(ci_examples=40)
@given(conv=_hostile_convs())
def test_hostile_onnx_convs_import_only_what_onnxruntime_runs(conv, tmp_path_factory):
    """Issue 32 item 3: a Conv node is imported only when onnxruntime runs it, and then its config plans;
    otherwise it is listed as not imported with a reason. Never a traceback."""
    import numpy as np
    import onnxruntime
    import onnx_models

    folder = tmp_path_factory.mktemp("onnx")
    model = onnx_models.single_conv(**conv)
    path = onnx_models.save(model, folder / "conv.onnx")
    with time_limit(SECONDS_PER_COMMAND):
        result = CliRunner().invoke(main, ["import", str(path), "-o", str(folder / "out"), "--target", "c"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1), result.output
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        session.run(None, {"x": np.ones((1, conv["channels"], conv["size"], conv["size"]), np.float32)})
        runs = True
    except Exception:  # noqa: BLE001 onnxruntime's errors are plain Exception subclasses
        runs = False
    if result.exit_code == 0:
        assert runs, f"imported a node onnxruntime refuses: {conv}"
        _run(["plan", str(folder / "out" / "conv.yaml")])
    else:
        assert "not imported: Conv conv: " in result.stdout, result.output


@pytest.mark.slow
@requires_tool("py:vulkan", "glslangValidator")
@fuzz_settings(ci_examples=6)
@given(case=valid_configs(max_side=8, max_channels=24, chain=3, target="vulkan"),
       tile=st.tuples(st.integers(1, 12), st.integers(1, 12), st.sampled_from([4, 8, 16, 32, 64])))
def test_rdna2_builds_of_random_tiles_end(case, tile, tmp_path_factory):
    """Issue 32 item 2: an explicit invocation tile on the rdna2 profile (the ACO compiler's statistics in a child)
    either is refused at vulkan.ivc_tile (past the accumulator bound) or builds; `build` never runs past the child's
    time limit (a killed compile is a note, not a hang), whatever the tile."""
    data = dict(case.data, vulkan={"device": "rdna2", "ivc_tile": list(tile)})
    path = tmp_path_factory.mktemp("tile") / "tile.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(main, ["build", str(path), "-o", str(path.parent / "out")])
    if result.exit_code == 2:  # the tile bound, or a documented limit of the random config itself
        assert ": error: vulkan.ivc_tile: " in result.output or "writes pad_value only into channel padding" in \
            result.output, result.output
        return
    assert result.exit_code == 0, result.output
    assert (path.parent / "out" / "fuzz" / "vulkan" / "fuzz.comp").is_file()


def test_the_memory_bound_counts_a_commands_own_peak():
    """A peak reached before the command (a test's large arrays, since freed) is not the command's; one the command
    reaches is, even when freed before it returns."""
    import numpy as np

    big = np.ones(64 << 20, np.uint8)  # 64 MiB resident, then freed
    del big
    _, grown = _peak_growth(lambda: None)
    assert grown < 32 << 20
    _, grown = _peak_growth(lambda: np.ones(96 << 20, np.uint8).sum())  # 96 MiB at the command's peak
    assert grown >= 64 << 20
