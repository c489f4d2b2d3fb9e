"""What the torch training tests share (import it after ``pytest.importorskip("torch")``): PyTorch's
MNIST example Net sized for 8x8 digits, and the check that two trainings ended in the same state,
bit for bit (deterministic torch for a module is conftest's ``deterministic_torch`` fixture)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

F = nn.functional


class DigitsNet(nn.Module):
    """PyTorch's MNIST example Net (two convolutions, two dropouts, two linear layers), for 8x8 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.relu(self.fc1(torch.flatten(self.dropout1(x), 1)))
        return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)



def assert_same_training(got: Any, want: Any) -> None:
    """``got`` and ``want`` (anything with ``model``, ``optimizer``, ``scheduler``) hold the same
    parameters, optimizer state, schedule and learning rate, bit for bit."""
    for (name, a), (_, b) in zip(got.model.state_dict().items(), want.model.state_dict().items(), strict=True):
        assert torch.equal(a.cpu(), b.cpu()), name
    for (index, a), b in zip(got.optimizer.state_dict()["state"].items(),
                             want.optimizer.state_dict()["state"].values(), strict=True):
        for key in a:
            assert torch.equal(torch.as_tensor(a[key]).cpu(), torch.as_tensor(b[key]).cpu()), (index, key)
    assert got.scheduler.state_dict() == want.scheduler.state_dict()
    assert got.optimizer.param_groups[0]["lr"] == want.optimizer.param_groups[0]["lr"]
