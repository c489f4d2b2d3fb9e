"""hetero's TorchDynamo backend (hetero.torch.compile, torch.compile(backend="hetero")): models
run on every device within float32 rounding of torch eager, training reaches p.grad, what runs
on the host is counted, and a wrong lowering or a mutating graph is an error, never silent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hetero
from hetero.core.errors import ConfigError

torch = pytest.importorskip("torch")
nn = torch.nn

import hetero.torch as ht  # noqa: E402  (after torch is known to be installed)
from hetero.torch.backend.interpreter import GraphProgram, LoweringMismatch, MutatingGraph  # noqa: E402
from hetero.torch.backend.lowerings import LOWERINGS  # noqa: E402
from hetero.torch.backend.report import Report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}  # float32 sums in another order (docs/torch.md)


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class MnistNet(nn.Module):
    """pytorch/examples' MNIST CNN, on 8x8 digits-sized inputs (random initialisation)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = nn.functional.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        return nn.functional.log_softmax(self.fc2(x), dim=1)


def mlp() -> Any:
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def test_an_mlp_forward_matches_eager_and_replays_one_launch_plan(device: hetero.Device) -> None:
    torch.manual_seed(0)
    model, x = mlp(), torch.randn(8, 64)
    compiled = ht.compile(model, device)
    for _ in range(3):  # traced, then replayed
        torch.testing.assert_close(compiled(x), model(x), **TOLERANCE)
    assert [g["jit"] for g in compiled.report.graphs] == [True] and not compiled.report.host_ops


def test_training_through_the_backend_follows_eager_sgd(device: hetero.Device) -> None:
    torch.manual_seed(1)
    model, twin = mlp(), mlp()
    twin.load_state_dict(model.state_dict())
    compiled = ht.compile(model, device)
    opt, twin_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    x, target = torch.randn(16, 64), torch.randint(0, 10, (16,))
    for _ in range(4):  # each step changes the parameters in torch: the device copies must follow
        for m, o in ((compiled, opt), (twin, twin_opt)):
            o.zero_grad()
            nn.functional.cross_entropy(m(x), target).backward()
            o.step()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, **TOLERANCE)
    assert not compiled.report.host_ops, str(compiled.report)
    assert all(g["jit"] for g in compiled.report.graphs) and len(compiled.report.graphs) == 2  # forward, backward


def test_the_mnist_cnn_lowers_every_forward_operation(device: hetero.Device) -> None:
    torch.manual_seed(2)
    model, x = MnistNet().eval(), torch.randn(4, 1, 8, 8)
    compiled = ht.compile(model, device)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), **TOLERANCE)
    ops = compiled.report.ops
    assert ops["aten.convolution.default"].lowered == 2 and ops["aten.max_pool2d_with_indices.default"].lowered == 1
    assert not compiled.report.host_ops


def test_gathers_scans_and_norms_lower(device: hetero.Device) -> None:
    x, index = torch.randn(4, 5), torch.tensor([[0, 4], [1, 1], [3, 2], [2, 0]])

    def f(x: Any, index: Any) -> Any:
        picked = torch.gather(x, 1, index) + x[index[:, 0], 1:3]
        return torch.cumsum(picked, dim=0), nn.functional.normalize(x, dim=1), torch.flip(x, (0,))

    compiled = ht.compile(f, device)
    for got, want in zip(compiled(x, index), f(x, index), strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    assert not compiled.report.host_ops, str(compiled.report)


def test_the_mnist_cnn_trains_as_in_eager(device: hetero.Device) -> None:
    torch.manual_seed(5)
    model, twin = MnistNet(), MnistNet()
    twin.load_state_dict(model.state_dict())
    model.dropout1.p = twin.dropout1.p = 0.0  # dropout draws from torch's generator: on the host (counted)
    compiled = ht.compile(model, device)
    opt, twin_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    x, target = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
    losses: dict[str, list[float]] = {"hetero": [], "eager": []}
    for _ in range(3):
        for side, m, o in (("hetero", compiled, opt), ("eager", twin, twin_opt)):
            o.zero_grad()
            loss = nn.functional.nll_loss(m(x), target)
            loss.backward()
            o.step()
            losses[side].append(loss.item())
    assert losses["hetero"] == pytest.approx(losses["eager"], rel=1e-5)
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, **TOLERANCE)
    assert not compiled.report.host_ops and all(g["jit"] for g in compiled.report.graphs), str(compiled.report)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (2, 1, 1), (1, 2, 2)])
def test_convolution_gradients_match_torch(device: hetero.Device, stride: int, padding: int, dilation: int) -> None:
    torch.manual_seed(6)
    x, w, b = torch.randn(2, 3, 9, 8), torch.randn(4, 3, 3, 2), torch.randn(4)

    def f(x: Any, w: Any, b: Any) -> Any:
        y = nn.functional.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation)
        return nn.functional.max_pool2d(y, 2, 1, padding=1)

    grads = []
    for run in (ht.compile(f, device), f):
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        out = run(*leaves)
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        grads.append([out.detach(), *(t.grad for t in leaves)])
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_max_pool_indices_are_torchs_including_ties_and_padding(device: hetero.Device) -> None:
    x = torch.tensor([[[[1.0, 3.0, 3.0, 0.0], [2.0, 3.0, 1.0, 5.0], [0.0, 0.0, 0.0, 0.0], [7.0, 1.0, 1.0, 7.0]]]])

    def pool(t: Any) -> Any:
        return torch.ops.aten.max_pool2d_with_indices(t, [2, 2], [1, 1], [1, 1])

    values, index = ht.compile(pool, device)(x)
    want_values, want_index = pool(x)
    assert torch.equal(values, want_values) and torch.equal(index, want_index)


def test_resnet18_forward_matches_eager(device: hetero.Device) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    from resnet import ResNet18

    torch.manual_seed(10)
    model, x = ResNet18(classes=10).eval(), torch.randn(2, 3, 64, 64)
    compiled = ht.compile(model, device)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), **TOLERANCE)
    assert not compiled.report.host_ops and compiled.report.ops["aten.convolution.default"].lowered == 20


def test_a_transformer_encoder_layer_runs_with_layer_norm_and_attention(device: hetero.Device) -> None:
    torch.manual_seed(3)
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0), 1,
                                  enable_nested_tensor=False)
    x = torch.randn(2, 5, 16)
    compiled = ht.compile(model, device)
    torch.testing.assert_close(compiled(x), model(x), **TOLERANCE)
    assert compiled.report.ops["aten.native_layer_norm.default"].lowered == 2 and not compiled.report.host_ops


def test_an_operation_without_a_lowering_runs_on_the_host_and_is_counted(device: hetero.Device) -> None:
    def f(x: Any) -> Any:
        return torch.erf(x * 2.0) + 1.0

    x = torch.linspace(-2, 2, 6)
    compiled = ht.compile(f, device)
    torch.testing.assert_close(compiled(x), f(x))
    host = compiled.report.host_ops
    assert list(host) == ["aten.erf.default"] and host["aten.erf.default"].reasons == {"no lowering yet"}
    assert compiled.report.graphs[0]["jit"] is False
    assert "aten.erf.default" in str(compiled.report) and "on the host" in str(compiled.report)


def test_explain_lists_lowered_and_host_operations() -> None:
    torch.manual_seed(4)
    report = ht.explain(MnistNet(), torch.randn(2, 1, 8, 8), device="cpu", backward=True)
    text = str(report)
    assert "aten.convolution.default" in text and "graph backward" in text
    assert list(report.host_ops) == ["aten.native_dropout.default"]  # torch's random stream: said, not hidden
    assert report.ops["aten.convolution_backward.default"].lowered == 2


def test_a_lowering_giving_the_wrong_dtype_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import hetero.xp as xp

    monkeypatch.setitem(LOWERINGS, torch.ops.aten.exp.default, lambda a: xp.astype(xp.exp(a), "float64"))
    with pytest.raises(LoweringMismatch, match="float64.*torch gives torch.float32"):
        ht.compile(torch.exp, "cpu")(torch.ones(3))


def test_a_graph_writing_into_its_input_is_refused() -> None:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.add_.Tensor, (x, x)))
    with pytest.raises(MutatingGraph, match="aten.add_.Tensor"):
        GraphProgram(torch.fx.GraphModule(nn.Module(), graph), hetero.device("cpu"), Report("cpu"), "g", None)


def test_a_parameter_changed_in_torch_is_uploaded_again(device: hetero.Device) -> None:
    model = nn.Linear(3, 2)
    compiled = ht.compile(model, device)
    x = torch.ones(1, 3)
    compiled(x)
    with torch.no_grad():
        model.weight.add_(1.0)  # bumps the version counter
    torch.testing.assert_close(compiled(x), model(x), **TOLERANCE)


def test_unknown_options_and_modes_are_refused() -> None:
    from hetero.torch.backend.dynamo import hetero_backend

    with pytest.raises(ConfigError, match="no option 'devise'"):
        hetero_backend(None, [], options={"devise": "cpu"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no mode"):
        hetero_backend(None, [], mode="max-autotune")  # type: ignore[arg-type]


def test_torch_compile_finds_the_backend_by_name_without_importing_hetero() -> None:
    code = ("import torch\n"
            "f = torch.compile(lambda x: torch.relu(x) * 2.0, backend='hetero', options={'device': 'cpu'})\n"
            "x = torch.tensor([-1.0, 3.0])\n"
            "assert torch.equal(f(x), torch.tensor([0.0, 6.0]))\n"
            "import sys; assert 'hetero.torch.backend.interpreter' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.usefixtures("state_dir")
def test_a_compiled_model_under_the_guard_moves_to_another_vendor_when_its_device_is_lost() -> None:
    names = {d.name for d in hetero.devices()}
    if not {"oneapi:0", "cpu"} <= names:
        pytest.skip("needs oneapi:0 (Intel's OpenCL CPU runtime) and cpu")
    torch.manual_seed(7)
    model, twin = mlp(), mlp()
    twin.load_state_dict(model.state_dict())
    compiled = ht.compile(model)  # no device: hetero.device(), the guard's inside the guard
    opt, twin_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    x, target = torch.randn(16, 64), torch.randint(0, 10, (16,))

    def step(m: Any, o: Any) -> None:
        o.zero_grad()
        nn.functional.cross_entropy(m(x), target).backward()
        o.step()

    with hetero.fault.inject("oneapi:0:launch:nth=56:lost"):  # in step 5 (about 11 launches a step)
        with hetero.guard({"model": model, "opt": opt}, device="oneapi:0", devices=["oneapi:0", "cpu"],
                          snapshot_every=2) as g:
            for _ in range(6):
                g.run(step, compiled, opt)
    for _ in range(6):
        step(twin, twin_opt)
    assert [(r["failed_device"], r["device"]) for r in g.recoveries] == [("oneapi:0", "cpu")]
    assert g.recoveries[0]["steps_replayed"] >= 1  # restored from the snapshot before, replayed on cpu
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):  # the fault-free run, to rounding
        torch.testing.assert_close(p, q, **TOLERANCE)


def test_batch_norm_and_average_pooling_train_and_evaluate_as_in_eager(device: hetero.Device) -> None:
    torch.manual_seed(8)

    def make() -> Any:
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    model, twin = make(), make()
    twin.load_state_dict(model.state_dict())
    compiled = ht.compile(model, device)
    opt, twin_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    x = torch.randn(4, 3, 8, 8)
    for _ in range(2):
        for m, o in ((compiled, opt), (twin, twin_opt)):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            o.step()
    for got, want in zip(model.state_dict().values(), twin.state_dict().values(), strict=True):  # running stats too
        torch.testing.assert_close(got, want, **TOLERANCE)
    model.eval()
    twin.eval()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), twin(x), **TOLERANCE)
    assert not compiled.report.host_ops, str(compiled.report)


def test_embedding_and_tanh_gelu_lower_and_exact_gelu_is_counted_on_the_host(device: hetero.Device) -> None:
    torch.manual_seed(9)
    table = nn.Embedding(10, 8)
    tokens = torch.tensor([[1, 9, 0], [4, 4, 2]])

    def f(t: Any) -> Any:
        e = table(t)
        return nn.functional.gelu(e, approximate="tanh") + nn.functional.gelu(e)

    compiled = ht.compile(f, device)
    with torch.no_grad():
        torch.testing.assert_close(compiled(tokens), f(tokens), **TOLERANCE)
    report = compiled.report
    assert report.ops["aten.embedding.default"].lowered == 1 and report.ops["aten.gelu.default"].lowered == 1
    assert "erf" in next(iter(report.host_ops["aten.gelu.default"].reasons))
