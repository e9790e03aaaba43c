"""Hostile YAML: every file ends in a config error at its own line and column, in bounded
time and memory; the YAML features configs use (anchors, aliases, merge keys) work."""
import time

import pytest

from kernelgen.config import yamlmarks
from kernelgen.api import load_config, parse_config
from kernelgen.errors import ConfigError

GOOD = "name: t\ninput: {shape: [1, 8, 8, 4]}\n"


def _problem(text: str | bytes, tmp_path) -> str:
    path = tmp_path / "hostile.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    first = str(caught.value.problems[0])
    assert first.startswith(str(path) + ":"), first
    position, message = first[len(str(path)) + 1:].split(": error: ", 1)
    return f"{position}: {message}"


def _laughs(levels: int) -> str:
    """The billion-laughs shape: each level is a list of nine aliases of the one before."""
    text = GOOD + "lol0: &l0 [x, x, x, x, x, x, x, x, x]\n"
    for level in range(1, levels + 1):
        text += f"lol{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]\n"
    return text


def test_alias_bomb_is_rejected_at_the_alias_without_expanding_it(tmp_path):
    start = time.process_time()
    where = _problem(_laughs(12), tmp_path)  # 9^13 nodes if expanded
    # level k holds 1 + 9 * (level k-1) nodes: 10, 91, 820, 7381, 66430; the first alias of level 4,
    # on level 5's line, takes the document past 100,000
    assert where.startswith("8:12: alias *l4 in lol5[0] expands to 66430 nodes") and "past 100000 nodes" in where
    assert time.process_time() - start < 5  # seconds of CPU: an expanding loader takes hours


def test_recursive_anchor_is_an_error_at_the_alias(tmp_path):
    assert _problem(GOOD + "x: &a [1, *a]\n", tmp_path).startswith("3:11: alias *a in x[1] refers to &a")


def test_deep_nesting_is_an_error_not_a_recursion_error(tmp_path):
    where = _problem(GOOD + "x: " + "[" * 800 + "]" * 800 + "\n", tmp_path)
    assert where.startswith(f"3:{3 + yamlmarks.MAX_DEPTH}: more than {yamlmarks.MAX_DEPTH} levels")


def test_undefined_and_doubly_defined_anchors(tmp_path):
    assert "alias *nope is not defined" in _problem(GOOD + "x: *nope\n", tmp_path)
    assert _problem(GOOD + "x: &a 1\ny: &a 2\n", tmp_path).startswith("4:4: anchor &a is defined twice")
    scalar = parse_config("name: t\ninput: {shape: [1, 8, 8, &c 6]}\nops: [{conv2d: {out_channels: *c}}]\n", "s.yaml")
    assert scalar.ops[0].out_channels == 6 and scalar.input_shape[-1] == 6


def test_not_utf8_is_reported_at_the_byte(tmp_path):
    assert _problem(b"name: t\n# caf\xe9\n", tmp_path).startswith("2:6: not UTF-8: byte 0xe9")


def test_nul_byte_is_reported_at_its_line(tmp_path):
    assert _problem(b"name: t\ninput: {shape: [1, 2,\x003, 4]}\n", tmp_path).startswith("2:22: unacceptable character")


def test_oversized_file_is_rejected_before_parsing(tmp_path):
    where = _problem("# " + "x" * yamlmarks.MAX_BYTES + "\n", tmp_path)
    assert where.startswith("1:1: the file is larger than")


def test_unsupported_tags_and_bad_timestamps(tmp_path):
    assert "tag 'tag:yaml.org,2002:python/object:os.system' is not supported" in _problem(GOOD + "x: !!python/object:os.system {}\n", tmp_path)
    assert _problem(GOOD + "x: 2024-13-01\n", tmp_path).startswith("3:4: cannot read '2024-13-01' as timestamp")


def test_merge_keys_and_aliases_build_a_config():
    text = ("name: merged\ninput: {shape: [1, 8, 8, 4]}\nops:\n"
            "  - conv2d: &base {out_channels: 8, kernel: 3, pad: 1}\n"
            "  - conv2d: {<<: *base, out_channels: 4}\n"
            "  - conv2d: *base\n")
    config = parse_config(text, "merged.yaml")
    assert [op.out_channels for op in config.ops] == [8, 4, 8]
    assert [op.kernel for op in config.ops] == [(3, 3)] * 3
    assert config.ops[1].pad == (1, 1, 1, 1)


def test_merge_of_a_list_keeps_the_first_and_explicit_keys_win():
    document = yamlmarks.load("a: &a {x: 1, y: 1}\nb: &b {x: 2, z: 2}\nc: {<<: [*a, *b], y: 3}\n")
    assert document.data["c"] == {"x": 1, "z": 2, "y": 3}
    with pytest.raises(yamlmarks.YamlProblem, match="a merge key << takes a mapping"):
        yamlmarks.load("c: {<<: 5}\n")


def test_an_error_inside_a_merged_mapping_points_at_its_line(tmp_path):
    text = ("name: t\ninput: {shape: [1, 8, 8, 4]}\nops:\n"
            "  - conv2d: &base {out_channels: 8, stride: 0}\n"
            "  - conv2d: {<<: *base, out_channels: 4}\n")
    assert _problem(text, tmp_path).startswith("4:45: ops[0].conv2d.stride")


def test_duplicate_keys_and_a_second_document(tmp_path):
    assert _problem(GOOD + "name: u\n", tmp_path).startswith("3:1: duplicate key 'name'")
    assert "expected a single document" in _problem(GOOD + "---\nname: u\n", tmp_path)
