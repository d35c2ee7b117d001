"""The system-level plan executed: a network's exported graph with each planned layer replaced by the chosen
kernel (our TVM module from its schedule.json, or torch's call), batch norms folded, epilogues fused, run as one
forward pass and compared with torch eager on the same input."""

from __future__ import annotations

import json

import pytest

MODEL = """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)
            self.c2, self.b2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.fc = torch.nn.Linear(8 * 8 * 8, 10)

        def forward(self, input):  # named as nn.Sequential names it: a copied graph renames it 'input_1'
            y = self.b1(self.c1(input)).relu()
            z = (self.b2(self.c2(y)) + y).relu()  # a residual add and a ReLU after a batch norm
            z = torch.nn.functional.relu6(self.dw(z))
            return self.fc(torch.nn.functional.max_pool2d(z, 2).flatten(1))

    def model():
        torch.manual_seed(0)
        m = Net()
        for bn in (m.b1, m.b2):  # statistics that are not the identity, so that a wrong fold shows
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)
        return m

    def example_input():
        return torch.randn(1, 3, 16, 16)
"""


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    import textwrap

    from hetero_dse.cli.main import main

    tmp = tmp_path_factory.mktemp("net")
    path = tmp / "net.py"
    path.write_text(textwrap.dedent(MODEL))
    out = tmp / "out"
    try:
        main(["explore", "--model", str(path), "--target", "cpu", "--trials", "2", "--no-history", "--out", str(out)])
    except SystemExit as exc:
        assert exc.code in (0, None)
    return path, out


def planned(path, out, call=None):
    from gpu_cpu.network import PlannedNetwork
    from hetero_dse.model.capture import capture
    from hetero_dse.model.zoo import build

    model, x = build(str(path))
    graph = capture(model, x, str(path), profile=False)
    (plan,) = json.loads((out / "plan.json").read_text())["devices"]
    if call is not None:  # every layer forced to one kernel
        report = json.loads((out / "report.json").read_text())
        modules = {e["layer"]: e["directory"] for e in report["model"]["devices"][0]["layers"]}
        plan = {**plan, "layers": [{**e, "call": call, "module": modules[e["layer"]]} for e in plan["layers"]]}
    return model, x, PlannedNetwork(graph, plan, out)


@pytest.mark.parametrize("call", [None, "hetero_dse", "library"])
def test_the_executed_plan_computes_what_torch_eager_computes(explored, call):
    from gpu_cpu.network import time_against_eager

    model, x, net = planned(*explored, call)
    assert sum(net.replaced.values()) == 4 and net.replaced["torch"] == 0
    if call is not None:
        assert net.replaced[call] == 4
    code = net.module.code
    # no convolution, batch norm, linear layer or epilogue op of torch's left: only the pooling and the reshape
    for gone in ("aten.conv2d", "aten.batch_norm", "aten.linear", "aten.relu", "aten.add", "aten.relu6"):
        assert gone not in code, code
    result = time_against_eager(model, net, x, rounds=1, repeat=1)  # raises where the outputs differ
    assert result["max_error"] <= 1e-4 * max(result["scale"], 1.0)


def test_a_schedule_for_another_layer_is_refused(explored):
    from hetero_dse.errors import HeteroDSEError

    path, out = explored
    (one,) = out.glob("conv2d_*L1/cpu/schedule.json")
    record = json.loads(one.read_text())
    (other,) = out.glob("conv2d_*L2/cpu/schedule.json")
    saved = other.read_text()
    try:
        other.write_text(json.dumps(record))
        with pytest.raises(HeteroDSEError, match="was written for another layer"):
            planned(path, out, "hetero_dse")
    finally:
        other.write_text(saved)
