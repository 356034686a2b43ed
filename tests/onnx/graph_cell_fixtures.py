#!/usr/bin/env python3
"""ONNX models written with onnx.helper (a producer independent of ms's
exporter) and their outputs computed with NumPy, for tests/onnx/test_graph_cell.cpp.

Usage: graph_cell_fixtures.py OUT_DIR

Writes, per model NAME: NAME.onnx, NAME.in<i>.npy and NAME.out<i>.npy, and
OUT_DIR/manifest.txt with one line "NAME n_inputs n_outputs" per model.
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def model(name, nodes, inputs, outputs, inits, opset=OPSET):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="onnx.helper")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def vi(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, dims)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def gemm_mlp():
    w1, c1, w2 = f32(4, 6), f32(4), f32(4, 3)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "c1"], ["h"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "w2"], ["z"]),
        helper.make_node("Softmax", ["z"], ["p"], axis=-1),
        helper.make_node("Tanh", ["z"], ["t"]),
        helper.make_node("Sigmoid", ["t"], ["s"]),
        helper.make_node("Exp", ["s"], ["e"]),
        helper.make_node("LogSoftmax", ["e"], ["q"], axis=1),
    ]
    m = model("gemm_mlp", nodes, [vi("x", TensorProto.FLOAT, ["batch", 6])],
              [vi("p", TensorProto.FLOAT, ["batch", 3]), vi("q", TensorProto.FLOAT, ["batch", 3])],
              [init("w1", w1), init("c1", c1), init("w2", w2)])
    x = f32(5, 6)
    z = np.maximum(0.5 * x @ w1.T + 2.0 * c1, 0) @ w2
    e = np.exp(1 / (1 + np.exp(-np.tanh(z))))
    q = e - e.max(1, keepdims=True)
    q = q - np.log(np.exp(q).sum(1, keepdims=True))
    return m, [x], [softmax(z), q]


def conv2d(x, w, b, stride, pad, group):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow), np.float64)
    og = o // group
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                win = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                y[:, oc, i, j] = (win * w[oc]).sum(axis=(1, 2, 3)) + b[oc]
    return y


def pool(x, k, stride, pad, op):
    n, c, h, w = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * stride - pad, j * stride - pad
            win = x[:, :, max(r0, 0):min(r0 + k, h), max(c0, 0):min(c0 + k, w)]
            y[:, :, i, j] = win.max(axis=(2, 3)) if op == "max" else win.mean(axis=(2, 3))
    return y


def conv_net():
    w, b = f32(4, 1, 3, 3), f32(4)
    scale, bias, mean, var = f32(4), f32(4), f32(4), (np.abs(f32(4)) + 0.5).astype(np.float32)
    wf = f32(36, 3)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], group=2, pads=[1, 1, 1, 1],
                         strides=[2, 2], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[2, 2], strides=[1, 1],
                         pads=[1, 1, 1, 1], count_include_pad=0),
        helper.make_node("BatchNormalization", ["a", "scale", "bias", "mean", "var"], ["n"],
                         epsilon=1e-3),
        helper.make_node("Flatten", ["n"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "wf"], ["y"]),
    ]
    m = model("conv_net", nodes, [vi("x", TensorProto.FLOAT, ["N", 2, 9, 9])],
              [vi("y", TensorProto.FLOAT, ["N", 3])],
              [init(k, v) for k, v in [("w", w), ("b", b), ("scale", scale), ("bias", bias),
                                       ("mean", mean), ("var", var), ("wf", wf)]])
    x = f32(3, 2, 9, 9)
    h = pool(np.maximum(conv2d(x, w, b, 2, 1, 2), 0), 2, 2, 0, "max")
    h = pool(h, 2, 1, 1, "avg")
    s = (1, 4, 1, 1)
    h = (h - mean.reshape(s)) / np.sqrt(var.reshape(s) + 1e-3) * scale.reshape(s) + bias.reshape(s)
    return m, [x], [h.reshape(3, -1) @ wf]


def shapes():
    gamma, beta = f32(4), f32(4)
    idx = np.array([[0, 2], [1, 1], [3, 0]], np.int64)
    i64 = lambda name, v: init(name, np.array(v, np.int64))
    nodes = [
        # ReduceMean then LayerNormalization over the last axis.
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1,
                         epsilon=1e-4),
        # A reshape target computed in the graph: [Shape(x)[0], -1].
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "zero"], ["b0"], axis=0),
        helper.make_node("Unsqueeze", ["b0", "axes0"], ["b1"]),
        helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
        helper.make_node("Concat", ["b1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["ln", "target"], ["flat"]),
        # Attention-like scores with a lower-triangular mask.
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["sc"]),
        helper.make_node("Trilu", ["sc"], ["low"], upper=0),
        helper.make_node("Equal", ["low", "zerof"], ["isz"]),
        helper.make_node("Not", ["isz"], ["nz"]),
        helper.make_node("Where", ["nz", "sc", "neg"], ["masked"]),
        helper.make_node("ReduceMax", ["masked"], ["mx"], axes=[2], keepdims=0),
        helper.make_node("ReduceSum", ["x", "axes2"], ["sm"], keepdims=1),
        helper.make_node("Squeeze", ["sm", "axes2"], ["sq"]),
        helper.make_node("Div", ["mx", "sq"], ["ratio"]),
        helper.make_node("Erf", ["ratio"], ["er"]),
        # Slicing, gathering, casting, expanding.
        helper.make_node("Slice", ["x", "st", "en", "axes2", "steps"], ["sl"]),
        helper.make_node("GatherElements", ["sl", "gidx"], ["ge"], axis=2),
        helper.make_node("Abs", ["ge"], ["ab"]),
        helper.make_node("Sqrt", ["ab"], ["sr"]),
        helper.make_node("Cast", ["sr"], ["c64"], to=TensorProto.DOUBLE),
        helper.make_node("Expand", ["gamma", "eshape"], ["ex"]),
        helper.make_node("Sub", ["ex", "ln"], ["d"]),
        helper.make_node("ReduceMean", ["d"], ["rm"], axes=[1, 2], keepdims=0),
        helper.make_node("Identity", ["rm"], ["out4"]),
    ]
    m = model("shapes", nodes, [vi("x", TensorProto.FLOAT, ["B", 3, 4])],
              [vi("flat", TensorProto.FLOAT, ["B", 12]), vi("er", TensorProto.FLOAT, ["B", 3]),
               vi("c64", TensorProto.DOUBLE, ["B", 3, 2]), vi("out4", TensorProto.FLOAT, ["B"])],
              [init("gamma", gamma), init("beta", beta), i64("zero", 0), i64("axes0", [0]),
               init("zerof", np.float32(0)), init("neg", np.float32(-100)), i64("axes2", [2]),
               i64("st", [1]), i64("en", [2**63 - 1]), i64("steps", [2]),
               init("gidx", np.broadcast_to(idx[None] % 2, (2, 3, 2)).copy()),
               i64("eshape", [1, 3, 4])])
    x = f32(2, 3, 4)  # the batch of gidx
    mu = x.mean(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-4) * gamma + beta
    sc = x @ x.transpose(0, 2, 1)
    low = np.tril(sc)
    masked = np.where(low != 0, sc, -100)
    ratio = masked.max(2) / x.sum(2)
    er = np.vectorize(math.erf)(ratio)
    sl = x[:, :, 1::2]
    ge = np.take_along_axis(sl, np.broadcast_to(idx[None] % 2, (2, 3, 2)), axis=2)
    out4 = (np.broadcast_to(gamma, (1, 3, 4)) - ln).mean(axis=(1, 2))
    return m, [x], [ln.reshape(2, -1), er, np.sqrt(np.abs(ge)).astype(np.float64), out4]


def misc():
    """The remaining elementwise, comparison, reduction and indexing ops."""
    w = f32(4, 5)
    i64 = lambda name, v: init(name, np.array(v, np.int64))
    nodes = [
        helper.make_node("Abs", ["x"], ["xa"]),
        helper.make_node("Pow", ["xa", "two"], ["p"]),
        helper.make_node("Sign", ["x"], ["sg"]),
        helper.make_node("Floor", ["x"], ["fl"]),
        helper.make_node("Ceil", ["x"], ["ce"]),
        helper.make_node("Sin", ["x"], ["si"]),
        helper.make_node("Cos", ["x"], ["co"]),
        helper.make_node("Softplus", ["x"], ["sp"]),
        helper.make_node("Max", ["sg", "fl", "si"], ["mx"]),
        helper.make_node("Min", ["ce", "co"], ["mn"]),
        helper.make_node("Less", ["x", "w"], ["lt"]),
        helper.make_node("GreaterOrEqual", ["x", "half"], ["ge"]),
        helper.make_node("Or", ["lt", "ge"], ["or_"]),
        helper.make_node("And", ["lt", "ge"], ["and_"]),
        helper.make_node("Where", ["or_", "p", "sp"], ["w1"]),
        helper.make_node("Where", ["and_", "mx", "mn"], ["w2"]),
        helper.make_node("Add", ["w1", "w2"], ["s"]),
        helper.make_node("ReduceMin", ["s"], ["rmin"], axes=[1], keepdims=0),
        helper.make_node("ReduceProd", ["sp"], ["rprod"], axes=[1], keepdims=1),
        helper.make_node("Squeeze", ["rprod"], ["rsq"]),
        helper.make_node("ArgMax", ["s"], ["am"], axis=1, keepdims=0),
        helper.make_node("ArgMin", ["s"], ["an"], axis=0, keepdims=1),
        helper.make_node("Gather", ["s", "neg_idx"], ["gt"], axis=1),
        helper.make_node("Gather", ["s", "scalar_idx"], ["g0"], axis=0),
        helper.make_node("Slice", ["s", "st", "en", "axes1"], ["sl"]),
        helper.make_node("Trilu", ["s", "k"], ["tu"], upper=1),
        helper.make_node("Constant", [], ["cf"], value_float=1.5),
        helper.make_node("Mul", ["tu", "cf"], ["tm"]),
        helper.make_node("Cast", ["am"], ["amf"], to=TensorProto.FLOAT),
    ]
    m = model("misc", nodes, [vi("x", TensorProto.FLOAT, ["B", 5])],
              [vi("rmin", TensorProto.FLOAT, ["B"]), vi("rsq", TensorProto.FLOAT, ["B"]),
               vi("amf", TensorProto.FLOAT, ["B"]), vi("an", TensorProto.INT64, [1, 5]),
               vi("gt", TensorProto.FLOAT, ["B", 2]), vi("g0", TensorProto.FLOAT, [5]),
               vi("sl", TensorProto.FLOAT, ["B", 2]), vi("tm", TensorProto.FLOAT, ["B", 5])],
              [init("w", w[0]), init("two", np.float32(2)), init("half", np.float32(0.5)),
               i64("axes1", [1]), i64("neg_idx", [-1, 0]), i64("scalar_idx", 2),
               i64("st", [-3]), i64("en", [-1]), i64("k", 1)])
    x = (f32(4, 5) * 2).astype(np.float32)
    lt, ge = x < w[0], x >= 0.5
    sp = np.log1p(np.exp(x.astype(np.float64)))
    mx = np.maximum(np.maximum(np.sign(x), np.floor(x)), np.sin(x))
    mn = np.minimum(np.ceil(x), np.cos(x))
    s = np.where(lt | ge, np.abs(x) ** 2, sp) + np.where(lt & ge, mx, mn)
    return m, [x], [s.min(1), sp.prod(1), s.argmax(1).astype(np.float64),
                    s.argmin(0)[None].astype(np.float64), s[:, [4, 0]], s[2], s[:, -3:-1],
                    np.triu(s, 1) * 1.5]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, make in [("gemm_mlp", gemm_mlp), ("conv_net", conv_net), ("shapes", shapes),
                       ("misc", misc)]:
        m, ins, outs = make()
        onnx.save(m, os.path.join(out, name + ".onnx"))
        for i, a in enumerate(ins):
            np.save(os.path.join(out, f"{name}.in{i}.npy"), a)
        for i, a in enumerate(outs):
            # In float64: the test compares ms's float32 results within a tolerance.
            np.save(os.path.join(out, f"{name}.out{i}.npy"), np.asarray(a, np.float64))
        lines.append(f"{name} {len(ins)} {len(outs)}")
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
