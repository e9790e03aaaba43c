"""Emitted C: deterministic, and its loop nest is the plan's loop nest (parsed with pycparser)."""
import re

import pytest
from pycparser import c_ast, c_parser

from kernelgen.api import load_config, parse_config
from kernelgen.emit import environment
from kernelgen.plan_types import Block, Guard, Loop, Section
from kernelgen.planner import plan
from kernelgen.targets import TARGETS


def _plan_tree(nodes) -> list:
    """[(var, extent, [children])], with guards and sections see-through."""
    out = []
    for node in nodes:
        if isinstance(node, Loop):
            out.append((node.var, node.extent, _plan_tree(node.body)))
        elif isinstance(node, (Guard, Section, Block)):
            out += _plan_tree(node.body)
    return out


def _c_tree(node) -> list:
    out = []
    for child in _children(node):
        if isinstance(child, c_ast.For):
            var = child.init.decls[0].name
            assert isinstance(child.cond, c_ast.BinaryOp) and child.cond.op == "<"
            assert child.cond.left.name == var
            if var == "e":
                # an element loop inside one of the plan's statements (the c target's row copy of the input cache,
                # bounded by the row's valid columns), not a loop of the plan's tree
                continue
            out.append((var, int(child.cond.right.value), _c_tree(child.stmt)))
        elif isinstance(child, c_ast.If):
            assert child.iffalse is None
            out += _c_tree(child.iftrue)
        elif isinstance(child, c_ast.Compound):
            out += _c_tree(child)
    return out


def _children(node):
    if isinstance(node, c_ast.Compound):
        return node.block_items or []
    return [node]


def _parse_kernel(source: str, name: str):
    # the micro-kernels' vector macros (GCC vector extensions or their fallback): one plain struct for pycparser
    source = re.sub(r"#if \(defined\(__GNUC__\).*?\n(?=#define KG_CLAMP)",
                    "typedef struct { float lane[8]; } kg_vf;\ntypedef struct { float lane[4]; } kg_vf4;\n"
                    "typedef struct { float lane[16]; } kg_vf16;\n", source,
                    flags=re.S)
    code = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    # directives dropped, indented ones too (a dense tile's two variants, #if KG_VF16: both are parsed), and the
    # store loops' KG_VECTOR_LOOP (a _Pragma where gcc compiles)
    code = "\n".join(line for line in code.splitlines()
                     if not line.lstrip().startswith("#") and line.strip() != "KG_VECTOR_LOOP")
    ast = c_parser.CParser().parse(code)
    return next(f for f in ast.ext if isinstance(f, c_ast.FuncDef) and f.decl.name == name)


@pytest.mark.parametrize("name", ["seed000_baseline", "seed000_split", "seed000_3x3"])
def test_emitted_loops_are_the_plan_loops(repo, name):
    config = load_config(repo / "configs" / f"{name}.yaml")
    the_plan = plan(config)
    job = TARGETS["c"].build(config, the_plan)
    kernel = _parse_kernel(job.files[f"{name}.c"], name)
    # the c target's loop tree: the plan's stripe loops, each conv's pixel loop cut into micro-kernel tiles
    assert _c_tree(kernel.body) == _plan_tree(job.target_plan.kernel.body)
    assert _plan_tree(the_plan.kernel.body)[0][:2] == ("ko_outer", 2 if name != "seed000_baseline" else 4)
    stripes = [(var, extent) for var, extent, _ in _c_tree(kernel.body)]
    assert stripes == [(var, extent) for var, extent, _ in _plan_tree(the_plan.kernel.body)]


def test_chain_with_padding_and_batch_loops_match():
    cfg = parse_config("name: t\ninput: {shape: [2, 9, 9, 5]}\nops:\n"
                       "  - conv2d: {out_channels: 6, kernel: 3, pad: 1}\n"
                       "  - conv2d: {out_channels: 3, kernel: 3, stride: 2}\n"
                       "output: {layout: {map: nchw-4c, pad_value: 0.5}}\n")
    the_plan = plan(cfg)
    job = TARGETS["c"].build(cfg, the_plan)
    kernel = _parse_kernel(job.files["t.c"], "t")
    tree = _c_tree(kernel.body)
    assert tree == _plan_tree(job.target_plan.kernel.body)
    assert [loop[:2] for loop in tree] == [loop[:2] for loop in _plan_tree(the_plan.kernel.body)]
    assert tree[0][:2] == ("nb", 2)  # batch loop outermost
    assert len(tree) == 2  # the stripe nest, then the pad_value pass
    # Channel padding that must hold 0 is stored by the conv itself (overcompute): no fill pass.
    zero = plan(parse_config("name: t\ninput: {shape: [2, 9, 9, 5]}\nops:\n"
                             "  - conv2d: {out_channels: 6, kernel: 3, pad: 1}\n"
                             "  - conv2d: {out_channels: 3, kernel: 3, stride: 2}\n"
                             "output: {layout: {map: nchw-4c, pad_value: 0}}\n"))
    assert len(_plan_tree(zero.kernel.body)) == 1


def test_render_is_deterministic(repo):
    config = load_config(repo / "configs" / "seed000_3x3.yaml")
    first = TARGETS["c"].build(config, plan(config)).files
    again = load_config(repo / "configs" / "seed000_3x3.yaml")
    second = TARGETS["c"].build(again, plan(again)).files
    assert first == second


def test_banner_names_config_template_and_version(repo):
    from kernelgen import __version__

    config = load_config(repo / "configs" / "seed000_split.yaml")
    text = TARGETS["c"].build(config, plan(config)).files["seed000_split.c"]
    first = text.splitlines()[0]
    assert "seed000_split.yaml" in first and "c/kernel.c.j2" in first and __version__ in first
    assert "Do not edit" in text.splitlines()[1]
    assert str(repo) not in text  # no absolute paths


def test_each_c_source_names_the_flags_build_list_flags_gives_and_headers_do_not(repo):
    """Issue 49: a generated .c copied into another project says what it was validated and timed with: the
    goldens' banners agree with `kernelgen build --list-flags`, line for line."""
    from click.testing import CliRunner

    from kernelgen.cli import main

    configs = sorted(str(p) for p in (repo / "configs").glob("*.yaml"))
    listed = CliRunner().invoke(main, ["build", *configs, "-o", "out", "--list-flags"])
    assert listed.exit_code == 0, listed.output
    flags: dict[str, list[str]] = {}
    for line in listed.stdout.splitlines():
        folder, kind, flag = line.split("\t")
        assert kind == "compile"  # no config of configs/ runs OpenMP threads
        flags.setdefault(folder, []).append(flag)
    sources = sorted((repo / "out").glob("*/*/*.c"))
    assert {str(p.parent.relative_to(repo)) for p in sources} == set(flags)  # c and hvx: every folder with a .c
    for source in sources:
        third = source.read_text().splitlines()[2]
        expected = " ".join(flags[str(source.parent.relative_to(repo))])
        assert third == f"   Compile with {expected} (as validated; kernelgen build --list-flags). */", source
        assert "Compile with" not in source.with_suffix(".h").read_text()
    assert flags["out/seed000_3x3/c"] == ["-O3", "-march=native", "-ffp-contract=fast"]
    assert flags["out/hvx_seed000_3x3_u8/hvx"] == ["-mcpu=hexagonv73", "-mhvx", "-mhvx-length=128b", "-O2"]


def test_each_gpu_source_says_how_it_was_compiled_and_its_json_or_dispatch_notes_do_not(repo):
    """Issue 49: the .cl and .comp a user hands to a driver or glslang say the options they were validated with: the
    OpenCL runner's build options (no fast-math), the Vulkan toolchain's target environment and per-op macro."""
    from kernelgen.targets.opencl.network import BUILD_OPTIONS
    from kernelgen.targets.vulkan.toolchain import TARGET_ENV

    cl = sorted((repo / "out").glob("*/opencl/*.cl"))
    comp = sorted((repo / "out").glob("*/vulkan/*.comp"))
    assert cl and comp
    for source in cl:
        assert source.read_text().splitlines()[2] == (f'   Build with clBuildProgram options "{BUILD_OPTIONS}" (as '
                                                      "validated: IEEE float, no fast-math options). */"), source
    for source in comp:  # line 1 is GLSL's #version, which must come first
        assert source.read_text().splitlines()[3] == (f"   Compile each op with glslangValidator -V --target-env "
                                                      f"{TARGET_ENV} -DKG_OP=<op> (as validated). */"), source
    for note in [*(repo / "out").glob("*/opencl/*.launch.json"), *(repo / "out").glob("*/vulkan/*.dispatch.txt")]:
        assert "as validated" not in note.read_text(), note


def test_a_configs_own_cflags_and_threads_are_the_flags_its_banner_names():
    config = parse_config("name: tuned\ninput: {shape: [1, 8, 8, 16]}\nops:\n  - conv2d: {out_channels: 16, kernel: 3}\n"
                          "c: {cflags: [-O2, -mavx2], threads: 2}\ntargets: [c]\n")
    text = TARGETS["c"].build(config, plan(config)).files["tuned.c"]
    assert text.splitlines()[2] == ("   Compile with -O2 -mavx2 -fopenmp; link with -fopenmp "
                                    "(as validated; kernelgen build --list-flags). */")


def test_environment_is_strict():
    import jinja2

    env = environment()
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_pipelined_kernel_loops_match_the_plan(repo):
    config = load_config(repo / "configs" / "seed000_3x3_double_buffer.yaml")
    the_plan = plan(config)
    job = TARGETS["c"].build(config, the_plan)
    kernel = _parse_kernel(job.files["seed000_3x3_double_buffer.c"], "seed000_3x3_double_buffer")
    tree = _c_tree(kernel.body)
    assert tree == _plan_tree(job.target_plan.kernel.body)
    # prologue load, then the pipeline loop over all 8 stripes, then the epilogue store.
    assert [(var, extent) for var, extent, _ in tree] == [("ih", 20), ("s", 8), ("oh", 16)]
