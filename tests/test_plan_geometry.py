"""The stripe geometry is a record of the Plan, derived once by the planner; the targets read it from there."""
from __future__ import annotations

import sys

import kernelgen
from kernelgen.expr import Const
from kernelgen.plan_types import Stripes
from kernelgen.planner.geometry import stripe_geometry
from kernelgen.targets.hvx.plan import hvx_plan

# seed 000's 3x3 chain with a strided, padded first conv: 64 -> 32 -> 30 rows and columns
STRIDED = """\
name: strided_chain
dtype: float32
input: {shape: [1, 64, 64, 128], layout: nhwc-8h8w32c}
ops:
  - conv2d: {out_channels: 128, kernel: 3, stride: 2, pad: 1, dilation: 1, filter_layout: oihw-8i32o4i}
  - conv2d: {out_channels: 128, kernel: 3, stride: 1, pad: 0, dilation: 1, filter_layout: oihw-8i32o4i}
output: {layout: nhwc-8h8w32c}
schedule: {k_split: 2, h_split: 2}
targets: [c, hvx]
"""


def test_the_plan_holds_each_tensors_stripe_window():
    geo = kernelgen.plan(kernelgen.load_config(STRIDED)).geometry
    assert geo.shapes == ((1, 64, 64, 128), (1, 32, 32, 128), (1, 30, 30, 128))
    # 2 x 32 output channels and 2 x 8 rows a stripe, full width: 2 channel stripes x 2 row stripes
    assert geo.stripes == Stripes(channels=64, rows=16, cols=30, ko_extent=2, ho_extent=2, wo_extent=1)
    # back through the chain: 16 rows of op 2's output read 18 of op 1's, which read (18 - 1) * 2 + 3 of the input
    assert geo.rows == (37, 18, 16) and geo.cols == (65, 32, 30)
    # row windows start at ho_outer * a + b: the input's one row above (the padding), two input rows per output row
    assert [geo.row_affine(j) for j in range(3)] == [(32, -1), (16, 0), (16, 0)]
    assert geo.col_start == (Const(-1), Const(0), Const(0))
    assert (geo.row_step, geo.halo_rows) == (32, 5)  # input rows between stripes; rows two stripes share


def test_hvx_reads_its_windows_from_the_plan(repo):
    config = kernelgen.load_config(repo / "configs" / "hvx_seed000_3x3_u8_halo_reuse.yaml")
    plan = kernelgen.plan(config)
    geo, hvx = plan.geometry, hvx_plan(config, plan)
    assert (geo.rows, geo.row_step, geo.halo_rows) == ((20, 18, 16), 16, 4)
    assert (hvx.ring_rows, hvx.ring_step) == (20, 16)  # the input cache is a ring of the input window's rows
    assert [(o.src_rows, o.dst_rows, o.row_a, o.row_b) for o in hvx.ops] == [(20, 18, 16, 0), (18, 16, 16, 0)]
    assert (hvx.io.in_rows, hvx.io.in_cols, hvx.io.in_row_a, hvx.io.out_rows) == (20, 64, 16, 16)


def test_the_geometry_is_derived_once_whatever_the_targets_build(monkeypatch):
    """Before the geometry was in the plan, the c target derived it again and hvx_plan up to five times more."""
    calls = []
    code = stripe_geometry.__code__

    def count(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls.append(frame.f_code.co_name)

    config = kernelgen.load_config(STRIDED)
    sys.setprofile(count)
    try:
        built = kernelgen.jobs(config, ("c", "hvx"))
    finally:
        sys.setprofile(None)
    assert set(built) == {"c", "hvx"} and built["hvx"].target_plan.io is not None
    assert calls == ["stripe_geometry"]
