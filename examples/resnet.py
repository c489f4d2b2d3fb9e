"""ResNet-18 (He et al., "Deep Residual Learning for Image Recognition", 2015): the architecture
torchvision's ``resnet18`` builds (basic blocks of two 3x3 convolutions with batch norm, a 1x1
strided projection where the shape changes, channels 64-128-256-512), written here so the torch
backend's tests and benchmarks run it without torchvision (whose wheel must match torch's build).

    python examples/resnet.py --device oneapi:0
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.downsample: nn.Module | None = None
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000, width: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, channels = [], width
        for stage, stride in enumerate((1, 2, 2, 2)):
            out = width * 2 ** stage
            stages.append(nn.Sequential(BasicBlock(channels, out, stride), BasicBlock(out, out, 1)))
            channels = out
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def main() -> None:
    import hetero.torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = ResNet18(classes=10).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        got, want = hetero.torch.compile(model, args.device)(x), model(x)
    print(f"ResNet-18 on {args.device}: largest difference from torch eager {(got - want).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
