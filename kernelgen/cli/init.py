"""`kernelgen init NAME`: a commented starter config. Registered by commands.py."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import KernelgenError
from ..files import write_if_changed

STARTER = """\
# yaml-language-server: $schema={schema}
# A kernelgen config. `kernelgen schema` prints the full schema; `kernelgen plan {path}` shows the plan.
name: {name}                      # names output files and C symbols: ^[a-z][a-z0-9_]*$
dtype: float32
input:
  shape: [1, 32, 32, 64]         # [n, h, w, c]: the order of the layout's letters (NCHW: [n, c, h, w])
  layout: nhwc-8h8w32c           # physical layout: a string, or {{map: "n, h, w, c -> ...", pad_value: 0}}
ops:                             # one conv2d, or a chain (each op reads the previous op's output)
  - conv2d: {{out_channels: 64, kernel: 3, stride: 1, pad: 1, dilation: 1, filter_layout: oihw-8i32o4i,
              groups: 1, bias: true, activation: relu}}   # groups: 64 = depthwise; activation: none |
                                 # relu | relu6 | [lo, hi] | hardswish | hardsigmoid; residual: input (or
                                 # K, op K's output, or a side input's name) adds a tensor of the op's
                                 # output shape before the activation; between convs: maxpool, avgpool,
                                 # global_avgpool, mul (see the README)
output:
  layout: nhwc-8h8w32c
schedule: auto                   # the default on c: splits, blocks and loop order fitted to one core's L2
                                 # (`kernelgen plan` shows what it chose); `fixed` for one block per stripe,
                                 # or {{k_split: 1, h_split: 1, ...}}: output-channel and row blocks per stripe
targets: [c]
"""


SCHEMA_FILE = "kernelgen.schema.json"


def _schema_for(config: Path) -> str:
    """The `$schema` path the starter config points at, relative to it, and always an existing file: a project's
    own `schema/kernelgen.schema.json` one folder up (this repository's layout), else the schema written
    beside the config (the wheel has no source tree to point into)."""
    import json

    from ..api import json_schema

    project_schema = config.parent / ".." / "schema" / SCHEMA_FILE
    if project_schema.is_file():
        return f"../schema/{SCHEMA_FILE}"
    write_if_changed(config.parent / SCHEMA_FILE, json.dumps(json_schema(), indent=2) + "\n")
    return SCHEMA_FILE


@click.command("init")
@click.argument("name")
@click.option("-o", "--output", "path", type=click.Path(dir_okay=False), help="Where to write (default: configs/NAME.yaml).")
def init_command(name: str, path: str | None) -> None:
    """Write a commented starter config.

    \b
    Example:
      kernelgen init my_conv && kernelgen plan configs/my_conv.yaml
    """
    import re

    from ..config.model import NAME_PATTERN
    from ..config.reserved import MAX_NAME_LENGTH, reserved_in

    if not re.match(NAME_PATTERN, name) or len(name) > MAX_NAME_LENGTH or reserved_in(name):
        click.echo(f"error: name {name!r} must match {NAME_PATTERN}, have at most {MAX_NAME_LENGTH} characters "
                   f"and not be a C, OpenCL or GLSL keyword or C library name", err=True)
        sys.exit(2)
    target = Path(path or f"configs/{name}.yaml")
    if target.exists():
        click.echo(f"error: {target} exists; not overwriting it", err=True)
        sys.exit(1)
    try:
        schema = _schema_for(target)
        write_if_changed(target, STARTER.format(name=name, path=target, schema=schema))
    except KernelgenError as error:  # a folder that cannot be written
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    click.echo(str(target))
