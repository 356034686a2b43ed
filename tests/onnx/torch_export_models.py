#!/usr/bin/python3
"""Models exported by PyTorch's torch.onnx.export (a producer nobody here
wrote) and PyTorch's outputs, for ms::GraphCell's interoperability tests
(tests/onnx/test_torch_models.cpp and the onnx_torch integration test).

Usage: /usr/bin/python3 torch_export_models.py OUT_DIR [--seed N]

Needs PyTorch (Debian's python3-torch, 1.13) and NumPy; no network. Builds,
with fixed seeds, an MLP, a small CNN with BatchNorm2d (eval, non-trivial
running stats) and an nn.TransformerEncoderLayer (d_model 32, 4 heads,
feed-forward 64, dropout 0, eval), plus a gated MLP written with the
patterns the exporter lowers to Split, ConstantOfShape, Where and Expand, and exports each at opsets 13 and 17 with
a dynamic batch axis. Per model NAME (e.g. mlp_op13) it writes NAME.onnx and,
per batch size B of BATCHES, NAME.b<B>.in0.npy (a random input, float32) and
NAME.b<B>.out0.npy (PyTorch's output, float32), and OUT_DIR/manifest.txt with
one line "NAME B1 B2" per model. The weights depend on the model only; the
inputs depend on --seed (default 0: the committed fixtures in
tests/onnx/torch_fixtures, regenerated with
`/usr/bin/python3 tests/onnx/torch_export_models.py tests/onnx/torch_fixtures`).
"""
import argparse
import io
import os
import warnings

import numpy as np
import torch
from torch import nn

OPSETS = (13, 17)
BATCHES = (1, 3)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        return torch.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(6 * 3 * 3, 4)

    def forward(self, x):
        # BatchNorm after the ReLU: the exporter folds a BatchNorm that
        # directly follows a Conv into its weights, this one stays a node.
        h = self.pool(self.bn(torch.relu(self.conv1(x))))
        h = torch.relu(self.conv2(h))
        return self.fc(torch.flatten(h, 1))


class Gated(nn.Module):
    """The exporter's other patterns: Split (torch.split), ConstantOfShape
    (torch.zeros of a dynamic size, ones_like), Where (masked_fill), the tanh
    form of GELU, a dynamic Expand."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(12, 5)

    def forward(self, x):
        a, b = torch.split(self.fc1(x), [6, 10], dim=1)
        mask = torch.ones_like(a).masked_fill(a > 0.5, 0.25)
        g = nn.functional.gelu(a, approximate="tanh") * mask
        pad = torch.zeros(x.shape[0], 2)
        h = torch.cat([g, b[:, :4], pad], dim=1)
        return self.fc2(h) + self.fc2.bias.expand(x.shape[0], 5)


def encoder():
    return nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                      activation="gelu", batch_first=True)


def build(name):
    """The model `name` in eval mode, weights from a seed of its own."""
    torch.manual_seed({"mlp": 1, "cnn": 2, "encoder": 3, "gated": 4}[name])
    m = {"mlp": Mlp, "cnn": Cnn, "encoder": encoder, "gated": Gated}[name]()
    if name == "cnn":  # non-trivial running statistics and affine parameters
        with torch.no_grad():
            m.bn.running_mean.uniform_(-0.5, 0.5)
            m.bn.running_var.uniform_(0.5, 2.0)
            m.bn.weight.uniform_(0.5, 1.5)
            m.bn.bias.uniform_(-0.5, 0.5)
    return m.eval()


def input_shape(name, batch):
    return {"mlp": (batch, 12), "gated": (batch, 12), "cnn": (batch, 2, 10, 10), "encoder": (batch, 5, 32)}[name]


def export(m, name, opset):
    """The ONNX bytes of `m` at `opset`, axis 0 of input and output dynamic."""
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.zeros(input_shape(name, 2)), f, opset_version=opset,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          do_constant_folding=True)
    return f.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gen = np.random.default_rng(a.seed)
    lines = []
    for name in ("mlp", "cnn", "encoder", "gated"):
        m = build(name)
        for opset in OPSETS:
            tag = f"{name}_op{opset}"
            with open(os.path.join(a.out, tag + ".onnx"), "wb") as f:
                f.write(export(m, name, opset))
            for b in BATCHES:
                x = gen.standard_normal(input_shape(name, b)).astype(np.float32)
                with torch.no_grad():
                    y = m(torch.from_numpy(x)).numpy()
                np.save(os.path.join(a.out, f"{tag}.b{b}.in0.npy"), x)
                np.save(os.path.join(a.out, f"{tag}.b{b}.out0.npy"), y.astype(np.float32))
            lines.append(f"{tag} " + " ".join(str(b) for b in BATCHES))
    with open(os.path.join(a.out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
