"""A network's verdict and each step's status, computed in measure/network_run.py beside the kernel loops (the
command line only prints them)."""
from __future__ import annotations

import pytest

from kernelgen.measure.network_run import NetworkVerdict, step_status
from kernelgen.measure.records import Status, unmeasured
from kernelgen.network.execute import Agreement, StepRun
from kernelgen.network.manifest import Step
from kernelgen.onnx.u8s8 import QuantOracle

OUT = Agreement("out", "float32", 0.0, 0.0, True)
EXACT = Agreement("y_q", "uint8", 0.0, 0.0, True)
CARRIED = Agreement("z_q", "uint8", 1.0, 0.25, True, why="carried from stem")


def _verdict(**given) -> NetworkVerdict:
    return NetworkVerdict(**{"network": "qn", "target": "hvx", "failed": False, "stopped": "", "outputs": (OUT,),
                             "quantized": (), "oracle": None} | given)


@pytest.mark.parametrize("failed, stopped, status", [(False, "", "pass"), (True, "", "FAIL"),
                                                     (False, "stopped at stem: no device", "incomplete"),
                                                     (True, "stopped at stem: no device", "FAIL")])
def test_the_status_says_whether_every_step_ran_and_passed(failed, stopped, status):
    assert _verdict(failed=failed, stopped=stopped).status == status


def test_the_summary_names_the_outputs_the_uint8_tensors_and_the_oracle():
    assert _verdict().summary == ("network qn on hvx: pass; output 'out' within 0.00e+00 of onnxruntime's largest "
                                  "magnitude (limit 0.001)")
    default = _verdict(quantized=(EXACT, EXACT, EXACT), oracle=QuantOracle())
    assert default.summary.endswith("; 3 of 3 uint8 tensors bit-exact; oracle: onnxruntime (its default session)")
    chosen = QuantOracle(name="onnxruntime u8u8", why="exact uint8 x uint8 products")
    stopped = _verdict(stopped="stopped at stem: no device", quantized=(EXACT, CARRIED), oracle=chosen)
    assert stopped.summary == ("network qn on hvx: incomplete; stopped at stem: no device; 1 of 2 uint8 tensors "
                               "bit-exact (the rest: carried from stem); oracle: onnxruntime u8u8 (exact uint8 x "
                               "uint8 products)")


def test_a_step_fails_by_its_kernels_record_or_its_agreement():
    step = Step(index=0, inputs=("x",), outputs=("out",))
    wrong = Agreement("out", "float32", 2.0, 1.0, False)
    assert step_status(StepRun(step, 0.1, None, (OUT,), True)) == ("pass", False)
    assert step_status(StepRun(step, 0.1, None, (wrong,), True)) == ("FAIL", True)
    skipped = unmeasured("stem", "hvx", 1, Status.NOT_RUN, "no device")
    assert step_status(StepRun(step, 0.1, skipped, (), False)) == ("not run", False)
    assert step_status(StepRun(step, 0.1, skipped, (wrong,), True)) == ("not run", True)
