"""The API-neutral plan of a network on a GPU (kernelgen/targets/gpu/network.py), on the classifier network's opencl
kernels: which allocation and offset each tensor gets, the arena's reuse over dispatch lifetimes, the weights
re-aligned for binding, and the barriers the data flow needs (and no others)."""
from __future__ import annotations

import pytest

import kernelgen
from kernelgen.api import TARGETS
from kernelgen.network.weights import pack_network_weights
from kernelgen.targets.gpu.network import ALIGNMENT, Allocation, plan_gpu_network

from test_network_weights import import_classifier


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    network = kernelgen.load_network(import_classifier(tmp_path_factory.mktemp("gpu_network"), "net", "opencl"))
    jobs = {s.config.name: kernelgen.jobs(s.config, ("opencl",))["opencl"] for s in network.kernels}
    weights, _ = pack_network_weights(network, jobs, TARGETS["opencl"])
    return network, weights, plan_gpu_network(network, TARGETS["opencl"], jobs, weights)


def test_the_ends_are_their_own_allocations_and_the_rest_share_the_arena(planned):
    network, _, plan = planned
    x, out = plan.region("x"), plan.region("fc_out")
    assert (x.allocation, x.offset, x.size_bytes) == (Allocation.INPUT, 0, 2 * 3 * 37 * 29 * 4)
    assert (out.allocation, out.offset, out.size_bytes) == (Allocation.OUTPUT, 0, 2 * 7 * 4)
    arena = {r.name: r for r in plan.regions if r.allocation == Allocation.ARENA}
    assert sorted(arena) == ["block_conv1_to_fc.temp1", "block_conv1_to_fc.temp2", "block_conv1_to_fc.temp3",
                             "downsample_out", "pool_out", "stem_to_pool.temp1"]
    # the stem's 6x19x15 conv output (13,680 bytes) is dead once pooled: the block's tensors reuse its bytes
    assert plan.arena_bytes == 17664 < plan.naive_arena_bytes == 23296
    assert all(r.offset % ALIGNMENT == 0 for r in plan.regions)
    # regions bound by one dispatch never share a byte (the kernels' arguments are restrict)
    for d in plan.dispatches:
        bound = [b.region for b in d.bindings]
        assert not any(a.overlaps(b) for i, a in enumerate(bound) for b in bound[:i]), d.index


def test_weights_are_realigned_from_the_file_in_its_order(planned):
    _, weights, plan = planned
    placed = [r for r in plan.regions if r.allocation == Allocation.WEIGHTS]
    assert [r.name for r in placed] == [f"{t.kernel}.{t.tensor}" for t in weights.tensors]
    assert [r.source_offset for r in placed] == [t.offset for t in weights.tensors]
    assert [r.size_bytes for r in placed] == [t.nbytes for t in weights.tensors]
    assert [r.offset for r in placed][:3] == [0, 4864, 5120]  # 4,704 bytes of stem filter, then 256-byte steps
    assert plan.weights_bytes == 16896


def test_barriers_only_where_a_dispatch_touches_what_another_wrote(planned):
    _, _, plan = planned
    assert [(d.kernel, d.dispatch.kernel) for d in plan.dispatches] == [
        ("stem_to_pool", "stem_to_pool_conv1"), ("stem_to_pool", "stem_to_pool_maxpool2"),
        ("downsample", "downsample_conv1"), ("block_conv1_to_fc", "block_conv1_to_fc_conv1"),
        ("block_conv1_to_fc", "block_conv1_to_fc_conv2"), ("block_conv1_to_fc", "block_conv1_to_fc_avgpool3"),
        ("block_conv1_to_fc", "block_conv1_to_fc_conv4")]
    # the block's first conv reads pool_out (behind the barrier before downsample) and writes bytes nothing since
    # that barrier touched: it may overlap the downsample conv
    assert [d.barrier for d in plan.dispatches] == [False, True, True, False, True, True, True]
    conv2 = plan.dispatches[4]
    assert [(b.tensor, b.region.name, b.writes) for b in conv2.bindings] == [
        ("temp1", "block_conv1_to_fc.temp1", True), ("filter2", "block_conv1_to_fc.filter2", False),
        ("bias2", "block_conv1_to_fc.bias2", False), ("side_shortcut", "downsample_out", False),
        ("temp2", "block_conv1_to_fc.temp2", True)]
