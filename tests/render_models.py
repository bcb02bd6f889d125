"""Model shapes used by the rendering, diff and export tests and by benchmarks/bench_render.py.

They reproduce the graph *shapes* that make naive Graphviz pictures explode (DESIGN.md:
many BatchNorm training checks, dense concatenations, wide fan-out of a few constants)
with tiny channel counts, so building, scripting and freezing them takes a second and
nothing is downloaded.
"""

from __future__ import annotations

import torch
from torch import nn


class ConvBnRelu(nn.Module):
    """conv -> batchnorm -> relu -> dropout: freezing folds the BN into the conv."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.bn(self.conv(x))))


class KeepsBuffer(nn.Module):
    """A buffer written in forward stays an attribute after freezing."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        y = self.lin(x)
        if bool(x.sum() > 0):
            y = y * 2
        return y + self.count


class Bottleneck(nn.Module):
    """ResNet bottleneck block (1x1, 3x3, 1x1 convs with batchnorm and a shortcut)."""

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.downsample(x))


class ResNet50Like(nn.Module):
    """A ResNet-50 layout (bottleneck blocks [3, 4, 6, 3]) with narrow channels."""

    def __init__(self, base: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, base, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(base)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = base
        layers = []
        for i, blocks in enumerate([3, 4, 6, 3]):
            width = base * 2**i
            stage = []
            for j in range(blocks):
                stage.append(Bottleneck(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * 4
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class DenseLayer(nn.Module):
    """DenseNet layer: bn-relu-conv1x1-bn-relu-conv3x3 on the concatenation of all inputs."""

    def __init__(self, cin: int, growth: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, 2 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(2 * growth)
        self.conv2 = nn.Conv2d(2 * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(torch.relu(self.norm1(x)))
        return self.conv2(torch.relu(self.norm2(x)))


class DenseBlock(nn.Module):
    """A dense block: every layer reads the outputs of all the layers before it."""

    def __init__(self, layers: int, cin: int, growth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + i * growth, growth) for i in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNetLike(nn.Module):
    """A DenseNet-121 layout (dense blocks [6, 12, 24, 16]) with narrow channels."""

    def __init__(self, growth: int = 2, blocks: tuple[int, ...] = (6, 12, 24, 16)) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        cin = 4
        stages = []
        for i, n in enumerate(blocks):
            stages.append(DenseBlock(n, cin, growth))
            cin = cin + n * growth
            if i < len(blocks) - 1:
                stages.append(nn.Sequential(nn.BatchNorm2d(cin), nn.Conv2d(cin, cin // 2, 1)))
                cin = cin // 2
        self.features = nn.Sequential(*stages)
        self.head = nn.Linear(cin, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(self.stem(x))
        return self.head(x.mean([2, 3]))


class SpeechLayer(nn.Module):
    """A conformer-ish speech layer: attention with many small ops and wide fan-out."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, 2 * dim)
        self.ff2 = nn.Linear(2 * dim, dim)
        self.conv = nn.Conv1d(dim, dim, 3, padding=1, groups=dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.size(0), x.size(1), x.size(2)
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = self.k(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = self.v(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / float(d // self.heads) ** 0.5, -1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.out(y))
        c = self.conv(x.transpose(1, 2)).transpose(1, 2)
        x = x + torch.nn.functional.silu(c)
        h = self.ff2(self.drop(torch.nn.functional.gelu(self.ff1(self.norm2(x)))))
        return x + 0.5 * h


class SpeechEncoderLike(nn.Module):
    """A wav2vec2-style stack: conv feature extractor, then attention layers."""

    def __init__(self, dim: int = 16, layers: int = 12, heads: int = 4) -> None:
        super().__init__()
        self.extract = nn.Sequential(
            nn.Conv1d(1, dim, 10, 5), nn.GELU(), nn.Conv1d(dim, dim, 3, 2), nn.GELU()
        )
        self.layers = nn.ModuleList(SpeechLayer(dim, heads) for _ in range(layers))
        self.proj = nn.Linear(dim, 8)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        x = self.extract(wave).transpose(1, 2)
        for layer in self.layers:
            x = layer(x)
        return self.proj(x)


def transformer_encoder(layers: int = 12, dim: int = 16) -> nn.Module:
    """``nn.TransformerEncoder`` with ``layers`` layers (its checks stay after freezing)."""
    layer = nn.TransformerEncoderLayer(dim, 2, dim_feedforward=32, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def scripted(module: nn.Module) -> torch.jit.ScriptModule:
    """Seeded-free helper: eval mode, then ``torch.jit.script``."""
    return torch.jit.script(module.eval())
