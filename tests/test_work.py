"""Traffic and work sums over stripes: closed forms against a stripe-by-stripe count."""
from __future__ import annotations


from conftest import count_calls
from hypothesis import given, settings, strategies as st

from kernelgen.api import parse_config
from kernelgen.planner import plan
from kernelgen.planner.work import Starts, _overlap


@settings(max_examples=400, deadline=None, derandomize=True)
@given(step=st.integers(1, 40), first=st.integers(-60, 60), extent=st.integers(0, 50), count=st.integers(1, 90),
       limit=st.integers(1, 400), skip=st.integers(0, 5))
def test_overlap_sum_matches_stripe_by_stripe(step, first, extent, count, limit, skip):
    starts = Starts(step=step, first=first, extent=extent)
    brute = sum(_overlap(step * k + first + skip, count, limit) for k in range(extent))
    assert starts.overlaps(count, limit, skip=skip) == brute


def test_overlap_sum_with_padding_far_larger_than_the_tensor():
    """2^31 one-row stripes over 8 rows padded by 2^31 - 1 each side: only windows k = 2^31 - 3 ..
    2^31 + 6 touch the tensor, 1 + 2 + 3 * 6 + 2 + 1 = 24 rows in all; counted without a loop."""
    assert Starts(step=1, first=-2**31, extent=2**32).overlaps(3, 8) == 24
    # a window taller than the tensor covers all 8 rows for 4 of its positions
    assert Starts(step=1, first=-(2**31), extent=2**32).overlaps(12, 8) == 2 * (1 + 2 + 3 + 4 + 5 + 6 + 7) + 5 * 8


def test_plan_work_does_not_grow_with_the_height():
    """Two million 8-row stripes: planned with about the work of a small image (no loop over stripes)."""
    text = ("name: tall\ninput: {{shape: [1, {height}, 4, 1]}}\nops:\n"
            "  - conv2d: {{out_channels: 1, kernel: 3, pad: 1}}\n  - conv2d: {{out_channels: 1, kernel: 3}}\n"
            "schedule: {{k_split: 1, h_split: 1, h_block: 8, halo: reuse}}\n")
    _, small_calls = count_calls(lambda: plan(parse_config(text.format(height=64))))
    config = parse_config(text.format(height=16777216))
    tall, tall_calls = count_calls(lambda: plan(config))
    assert tall_calls < 2 * small_calls, (tall_calls, small_calls)
    assert tall.stripe_counts == (1, 2097152, 1)
    assert tall.flops == 2 * 9 * (16777216 * 4 + 16777214 * 2)


def test_split_choices_are_every_stripe_count_once():
    import math

    from kernelgen.planner.search import _split_choices

    for blocks in [*range(1, 400), 1023, 4099]:
        every = sorted({math.ceil(blocks / math.ceil(blocks / split)) for split in range(1, blocks + 1)})
        assert _split_choices(blocks) == every, blocks


def test_budget_search_on_a_huge_image_is_sampled_not_exhaustive():
    config = parse_config("name: wide\ninput: {shape: [1, 8192, 8192, 4]}\nops:\n"
                          "  - conv2d: {out_channels: 4, kernel: 3, pad: 1}\n"
                          "schedule: {budget: 4MiB, h_block: 1, w_block: 1}\n")
    wide = plan(config)
    assert wide.search.tried <= 1024 and wide.workspace_bytes <= 4 * 2 ** 20


def test_a_workspace_past_32_bit_indices_is_a_config_error():
    import pytest

    from kernelgen.errors import ConfigError

    config = parse_config("name: big\ninput: {shape: [1, 23170, 23170, 3]}\nops:\n"
                          "  - conv2d: {out_channels: 2, kernel: 1}\nschedule: {k_split: 1, h_split: 2897}\n",
                          "big.yaml")
    with pytest.raises(ConfigError) as error:
        plan(config)
    assert str(error.value.problems[0]).startswith("big.yaml:5:") and "32-bit index" in str(error.value.problems[0])
