"""Real-size model shapes for freezeview's benchmarks and slow tests, built without downloads.

* :func:`resnet50` - a torchvision-style ResNet-50 (bottleneck blocks [3, 4, 6, 3]),
  scripted the way torchvision scripts it (``forward`` calls ``_forward_impl``).
* :func:`transformer_encoder` - a scripted 12-layer ``nn.TransformerEncoder``.
* :func:`conv_stack` - a flat ``nn.Sequential`` of Conv-BN-ReLU blocks (~50 inlined
  nodes each): many modules of one type, the shape that shows scans quadratic in them.
* :func:`densenet_like` - dense blocks of concatenated conv-bn-relu layers (~6k inlined nodes).
* :func:`speech_encoder` - a wav2vec2-style conv feature extractor plus wide-fan-out
  encoder layers (many small ops per layer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "MODELS",
    "conv_stack",
    "densenet_like",
    "resnet50",
    "speech_encoder",
    "transformer_encoder",
]


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: bool = False):
        super().__init__()
        width = planes
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = (
            nn.Sequential(
                nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * 4),
            )
            if downsample
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (3, 4, 6, 3), num_classes: int = 1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * 4, num_classes)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        layers = [Bottleneck(self.inplanes, planes, stride, downsample=True)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def _forward_impl(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._forward_impl(x)


def resnet50(num_classes: int = 1000) -> torch.jit.ScriptModule:
    """Scripted ResNet-50-sized network in eval mode (input 1x3x224x224)."""
    torch.manual_seed(0)
    return torch.jit.script(ResNet(num_classes=num_classes).eval())


def transformer_encoder(
    layers: int = 12, d_model: int = 256, heads: int = 4
) -> torch.jit.ScriptModule:
    """Scripted ``nn.TransformerEncoder`` in eval mode (input 1x16xd_model, batch_first)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, heads, d_model * 4, batch_first=True)
    encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return torch.jit.script(encoder.eval())


def conv_stack(blocks: int = 512, channels: int = 8) -> torch.jit.ScriptModule:
    """Scripted flat stack of ``blocks`` Conv-BN-ReLU blocks in eval mode (input
    1x``channels``x8x8): every block a ``Sequential`` of the same three module types."""
    torch.manual_seed(0)
    stack = nn.Sequential(
        *(
            nn.Sequential(
                nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                nn.BatchNorm2d(channels),
                nn.ReLU(),
            )
            for _ in range(blocks)
        )
    )
    return torch.jit.script(stack.eval())


class DenseLayer(nn.Module):
    def __init__(self, channels: int, growth: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv1 = nn.Conv2d(channels, 4 * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(F.relu(self.bn1(x)))
        return self.conv2(F.relu(self.bn2(x)))


class DenseBlock(nn.Module):
    def __init__(self, layers: int, channels: int, growth: int):
        super().__init__()
        self.layers = nn.ModuleList(
            DenseLayer(channels + i * growth, growth) for i in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNetLike(nn.Module):
    def __init__(self, blocks: tuple[int, ...] = (6, 12, 24, 16), growth: int = 32):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU()
        )
        channels = 64
        stages: list[nn.Module] = []
        for i, n in enumerate(blocks):
            stages.append(DenseBlock(n, channels, growth))
            channels += n * growth
            if i < len(blocks) - 1:
                stages.append(
                    nn.Sequential(
                        nn.BatchNorm2d(channels),
                        nn.ReLU(),
                        nn.Conv2d(channels, channels // 2, 1),
                        nn.AvgPool2d(2),
                    )
                )
                channels //= 2
        self.features = nn.Sequential(*stages)
        self.classifier = nn.Linear(channels, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(self.stem(x))
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(F.relu(x), 1), 1))


def densenet_like() -> torch.jit.ScriptModule:
    """Scripted DenseNet-121-shaped network in eval mode (input 1x3x224x224)."""
    torch.manual_seed(0)
    return torch.jit.script(DenseNetLike().eval())


class SpeechLayer(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
        self.norm1 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, 4 * d)
        self.ff2 = nn.Linear(4 * d, d)
        self.norm2 = nn.LayerNorm(d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, _ = self.attn(x, x, x, need_weights=False)
        x = self.norm1(x + self.drop(a))
        return self.norm2(x + self.drop(self.ff2(F.gelu(self.ff1(x)))))


class SpeechEncoder(nn.Module):
    def __init__(self, layers: int = 12, d: int = 256):
        super().__init__()
        convs: list[nn.Module] = []
        channels = 1
        for kernel, stride in ((10, 5), (3, 2), (3, 2), (3, 2), (2, 2)):
            convs += [nn.Conv1d(channels, d, kernel, stride), nn.GroupNorm(1, d), nn.GELU()]
            channels = d
        self.extractor = nn.Sequential(*convs)
        self.layers = nn.ModuleList(SpeechLayer(d) for _ in range(layers))

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        x = self.extractor(wav).transpose(1, 2)
        for layer in self.layers:
            x = layer(x)
        return x


def speech_encoder() -> torch.jit.ScriptModule:
    """Scripted wav2vec2-style encoder in eval mode (input 1x1x16000)."""
    torch.manual_seed(0)
    return torch.jit.script(SpeechEncoder().eval())


class SmallConvNet(nn.Module):
    """Scripted conv + batchnorm + relu + linear, batch 1: the small model of the
    latency measurement (freezing makes it faster, optimize_for_inference slower)."""

    def __init__(self, channels: int = 8, size: int = 16) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels * size * size, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def small_conv_net(seed: int = 0) -> torch.jit.ScriptModule:
    """The scripted small model, in eval mode, with reproducible weights."""
    torch.manual_seed(seed)
    return torch.jit.script(SmallConvNet().eval())


#: The small model's input: batch 1, 3 channels, 16x16.
SMALL_INPUT_SHAPE = (1, 3, 16, 16)


#: name -> (builder, example input shape)
MODELS = {
    "resnet50": (resnet50, (1, 3, 224, 224)),
    "transformer12": (transformer_encoder, (1, 16, 256)),
    "densenet": (densenet_like, (1, 3, 224, 224)),
    "speech": (speech_encoder, (1, 1, 16000)),
}
