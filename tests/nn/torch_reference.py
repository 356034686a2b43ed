#!/usr/bin/env python3
"""Reference numbers from PyTorch for tests/nn/test_torch_reference.cpp.

Not run by the test suite (torch is not needed to run the tests): it was run
once on the development machine (Debian python3-torch 1.13) and its output is
the block between the "BEGIN GENERATED" / "END GENERATED" markers of the test
file. To regenerate:

    /usr/bin/python3 tests/nn/torch_reference.py --update tests/nn/test_torch_reference.cpp

(or without --update to print the block). Inputs are float32 numbers drawn
with a fixed seed; the expected values are computed by torch in float64 from
those float32 inputs (so they are torch's results without float32 rounding
noise), and printed with 9 significant digits (float32 inputs round-trip
exactly).

MindSpore conventions mapped onto torch here:
  * Dense weight [out, in] == torch Linear; Conv2d weight [out, in/group, kh, kw].
  * Conv2d pad_mode "pad" == torch padding; "same" with stride 1 == torch
    padding='same'; "same" with stride > 1 is MindSpore's rule (pad_needed =
    max(0, (ceil(H/s) - 1) * s + k - H), top = pad_needed // 2, the rest at the
    bottom), written with F.pad.
  * BatchNorm momentum: ms 0.9 == torch 0.1 (moving = m * moving + (1 - m) * batch);
    the moving variance uses the unbiased batch variance (as torch).
  * Momentum (MindSpore) == torch SGD(momentum, dampening=0).
"""
import argparse
import math
import re
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(20240501)
_entries = []  # (name, tensor, comment)


def emit(name, t, comment=None):
    _entries.append((name, t.detach().double().clone(), comment))


def rnd(*shape, scale=1.0, shift=0.0):
    """float32 inputs (rounded once), returned as float64 leaves for exact reference math."""
    return ((torch.randn(*shape) * scale + shift).float()).double()


def leaf(t):
    return t.clone().requires_grad_(True)


def grads_of(y, cot, *leaves):
    (y * cot).sum().backward()
    return [l.grad for l in leaves]


# ---------------------------------------------------------------- Dense
x, w, b, r = rnd(2, 2, 4), rnd(3, 4, scale=0.5), rnd(3), rnd(2, 2, 3)
xl, wl, bl = leaf(x), leaf(w), leaf(b)
y = F.linear(xl, wl, bl)
dx, dw, db = grads_of(y, r, xl, wl, bl)
for n, t in [("x", x), ("w", w), ("b", b), ("r", r), ("y", y), ("dx", dx), ("dw", dw), ("db", db)]:
    emit("dense_" + n, t)

# ---------------------------------------------------------------- Conv2d pad 1, stride 2, group 2
x, w, b, = rnd(2, 4, 5, 5), rnd(4, 2, 3, 3, scale=0.3), rnd(4)
xl, wl, bl = leaf(x), leaf(w), leaf(b)
y = F.conv2d(xl, wl, bl, stride=2, padding=1, groups=2)
r = rnd(*y.shape)
dx, dw, db = grads_of(y, r, xl, wl, bl)
for n, t in [("x", x), ("w", w), ("b", b), ("r", r), ("y", y), ("dx", dx), ("dw", dw), ("db", db)]:
    emit("convpad_" + n, t)

# ---------------------------------------------------------------- Conv2d "same", stride 1, kernel 3x2
x, w = rnd(1, 2, 4, 5), rnd(3, 2, 3, 2, scale=0.4)
xl, wl = leaf(x), leaf(w)
y = F.conv2d(xl, wl, None, padding="same")
r = rnd(*y.shape)
dx, dw = grads_of(y, r, xl, wl)
for n, t in [("x", x), ("w", w), ("r", r), ("y", y), ("dx", dx), ("dw", dw)]:
    emit("convsame_" + n, t)

# ---------------------------------------------------------------- Conv2d "same", stride 2 (MindSpore's padding rule)
x, w, b = rnd(1, 1, 6, 7), rnd(2, 1, 3, 3, scale=0.4), rnd(2)


def same_pad(size, k, s):
    out = math.ceil(size / s)
    need = max(0, (out - 1) * s + k - size)
    return need // 2, need - need // 2


xl, wl, bl = leaf(x), leaf(w), leaf(b)
top, bottom = same_pad(6, 3, 2)
left, right = same_pad(7, 3, 2)
y = F.conv2d(F.pad(xl, (left, right, top, bottom)), wl, bl, stride=2)
r = rnd(*y.shape)
dx, dw, db = grads_of(y, r, xl, wl, bl)
for n, t in [("x", x), ("w", w), ("b", b), ("r", r), ("y", y), ("dx", dx), ("dw", dw), ("db", db)]:
    emit("convsame2_" + n, t)

# ---------------------------------------------------------------- pooling
x = rnd(2, 2, 5, 5)
emit("pool_x", x)
pools = {
    "maxvalid": lambda t: F.max_pool2d(t, 2),  # MaxPool2d(2)
    "maxpad": lambda t: F.max_pool2d(t, 3, 2, 1),  # MaxPool2d(3, stride 2, "pad", 1)
    "maxceil": lambda t: F.max_pool2d(t, 2, 2, ceil_mode=True),
    "avgvalid": lambda t: F.avg_pool2d(t, 2, 1),  # AvgPool2d(2, stride 1)
    "avgpad": lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=True),
    "avgceil": lambda t: F.avg_pool2d(t, 2, 2, ceil_mode=True),
}
for name, fn in pools.items():
    xl = leaf(x)
    y = fn(xl)
    r = rnd(*y.shape)
    (dx,) = grads_of(y, r, xl)
    emit(f"pool_{name}_r", r)
    emit(f"pool_{name}_y", y)
    emit(f"pool_{name}_dx", dx)

# ---------------------------------------------------------------- BatchNorm2d
x = rnd(3, 2, 2, 3, scale=2.0, shift=0.5)
gamma, beta = rnd(2, scale=0.5, shift=1.0), rnd(2, scale=0.5)
mm0, mv0 = rnd(2, scale=0.1), (torch.rand(2) + 0.5).float().double()
xl, gl, bl = leaf(x), leaf(gamma), leaf(beta)
mm, mv = mm0.clone(), mv0.clone()
y = F.batch_norm(xl, mm, mv, gl, bl, training=True, momentum=0.1, eps=1e-5)
r = rnd(*y.shape)
dx, dg, db = grads_of(y, r, xl, gl, bl)
x2 = rnd(2, 2, 2, 3)
ye = F.batch_norm(x2, mm, mv, gamma, beta, training=False, eps=1e-5)
for n, t in [("x", x), ("gamma", gamma), ("beta", beta), ("mm0", mm0), ("mv0", mv0), ("r", r),
             ("y", y), ("dx", dx), ("dgamma", dg), ("dbeta", db), ("mm1", mm), ("mv1", mv),
             ("x2", x2), ("yeval", ye)]:
    emit("bn2d_" + n, t)

# BatchNorm1d [N, C], default moving statistics (0, 1)
x = rnd(4, 3, scale=1.5, shift=-0.3)
mm, mv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
y = F.batch_norm(x, mm, mv, None, None, training=True, momentum=0.1, eps=1e-5)
for n, t in [("x", x), ("y", y), ("mm1", mm), ("mv1", mv)]:
    emit("bn1d_" + n, t)

# ---------------------------------------------------------------- LayerNorm over [3, 4]
x = rnd(2, 3, 4, scale=1.5, shift=0.2)
gamma, beta = rnd(3, 4, scale=0.5, shift=1.0), rnd(3, 4, scale=0.5)
xl, gl, bl = leaf(x), leaf(gamma), leaf(beta)
y = F.layer_norm(xl, [3, 4], gl, bl, eps=1e-5)
r = rnd(*y.shape)
dx, dg, db = grads_of(y, r, xl, gl, bl)
# ms's default eps 1e-7 (MindSpore), default gamma 1 / beta 0, on a low-variance input
x7 = rnd(2, 4, scale=1e-3)
y7 = F.layer_norm(x7, [4], eps=1e-7)
for n, t in [("x", x), ("gamma", gamma), ("beta", beta), ("r", r), ("y", y), ("dx", dx),
             ("dgamma", dg), ("dbeta", db), ("x7", x7), ("y7", y7)]:
    emit("ln_" + n, t)

# ---------------------------------------------------------------- losses
logits = rnd(4, 5, scale=1.5)
labels = torch.tensor([1, 0, 4, 1])
cw = (torch.rand(5) + 0.5).float().double()
probs = torch.softmax(rnd(4, 5), 1)
probs = probs.float().double()  # float32 target probabilities
r4 = rnd(4)
emit("ce_logits", logits)
emit("ce_labels", labels)
emit("ce_weight", cw)
emit("ce_probs", probs)
emit("ce_r", r4)
ce_cases = {
    "mean": dict(target=labels, reduction="mean"),
    "sum": dict(target=labels, reduction="sum"),
    "none": dict(target=labels, reduction="none"),
    "ls": dict(target=labels, reduction="mean", label_smoothing=0.1),
    "ls_sum": dict(target=labels, reduction="sum", label_smoothing=0.1),
    "w_mean": dict(target=labels, reduction="mean", weight=cw),
    "w_sum": dict(target=labels, reduction="sum", weight=cw),
    "w_none": dict(target=labels, reduction="none", weight=cw),
    "w_ls": dict(target=labels, reduction="mean", weight=cw, label_smoothing=0.1),
    "w_ls_none": dict(target=labels, reduction="none", weight=cw, label_smoothing=0.1),
    "prob": dict(target=probs, reduction="mean"),
    "prob_ls": dict(target=probs, reduction="mean", label_smoothing=0.1),
}
for name, kw in ce_cases.items():
    ll = leaf(logits)
    target = kw.pop("target")
    loss = F.cross_entropy(ll, target, **kw)
    (dl,) = grads_of(loss, r4 if loss.dim() == 1 else torch.ones(()), ll)
    emit(f"ce_{name}_loss", loss)
    emit(f"ce_{name}_dlogits", dl)

logp = torch.log_softmax(rnd(4, 5), 1).float().double()
emit("nll_logp", logp)
for red in ["mean", "sum", "none"]:
    ll = leaf(logp)
    loss = F.nll_loss(ll, labels, reduction=red)
    (dl,) = grads_of(loss, r4 if red == "none" else torch.ones(()), ll)
    emit(f"nll_{red}_loss", loss)
    emit(f"nll_{red}_dlogp", dl)

a, bt, r34 = rnd(3, 4), rnd(3, 4), rnd(3, 4)
bce_x, bce_t = rnd(3, 4, scale=2.0), torch.rand(3, 4).float().double()
bce_t[0, 0], bce_t[1, 2] = 0.0, 1.0  # hard targets too
for n, t in [("a", a), ("b", bt), ("r", r34), ("bcex", bce_x), ("bcet", bce_t)]:
    emit("pw_" + n, t)
for lname, fn, inp, tgt in [("mse", F.mse_loss, a, bt), ("l1", F.l1_loss, a, bt),
                            ("bce", F.binary_cross_entropy_with_logits, bce_x, bce_t)]:
    for red in ["mean", "sum", "none"]:
        al = leaf(inp)
        loss = fn(al, tgt, reduction=red)
        (da,) = grads_of(loss, r34 if red == "none" else torch.ones(()), al)
        emit(f"{lname}_{red}_loss", loss)
        emit(f"{lname}_{red}_dx", da)

# ---------------------------------------------------------------- optimizers
p1, p2 = rnd(2, 2), rnd(3)
gs = [(rnd(2, 2), rnd(3)) for _ in range(3)]
emit("opt_p1", p1)
emit("opt_p2", p2)
for i, (g1, g2) in enumerate(gs):
    emit(f"opt_g{i + 1}_1", g1)
    emit(f"opt_g{i + 1}_2", g2)
opt_cases = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "sgd_mom_wd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov_wd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                                  weight_decay=0.01),
    "sgd_damp": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
    # MindSpore Momentum(lr 0.1, momentum 0.9) and Momentum(use_nesterov, weight_decay 0.01)
    "momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "momentum_nesterov_wd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                                       weight_decay=0.01),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.1),
    "adam_wd": lambda ps: torch.optim.Adam(ps, lr=0.1, weight_decay=0.1),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.01),
}
for name, make in opt_cases.items():
    q1, q2 = leaf(p1), leaf(p2)
    opt = make([q1, q2])
    for step, (g1, g2) in enumerate(gs, start=1):
        q1.grad, q2.grad = g1.clone(), g2.clone()
        opt.step()
        emit(f"opt_{name}_s{step}_1", q1)
        emit(f"opt_{name}_s{step}_2", q2)

# ---------------------------------------------------------------- Embedding
table = rnd(6, 3)
ids = torch.tensor([[1, 4, 1], [0, 4, 1]])
tl = leaf(table)
y = F.embedding(ids, tl)
r = rnd(*y.shape)
(dt,) = grads_of(y, r, tl)
for n, t in [("table", table), ("ids", ids), ("r", r), ("y", y), ("dtable", dt)]:
    emit("emb_" + n, t)


# ---------------------------------------------------------------- output
def fmt(v):
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    s = "%.9g" % v
    return s


def block():
    lines = [f"// BEGIN GENERATED by tests/nn/torch_reference.py (torch {torch.__version__})"]
    for name, t, _ in _entries:
        shape = ", ".join(str(d) for d in t.shape)
        vals = ", ".join(fmt(v) for v in t.flatten().tolist())
        lines.append(f"const Ref {name}{{{{{shape}}}, {{{vals}}}}};")
    lines.append("// END GENERATED")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--update", help="rewrite the generated block of this C++ file in place")
    args = ap.parse_args()
    text = block()
    if not args.update:
        sys.stdout.write(text)
        return
    with open(args.update) as f:
        src = f.read()
    pat = re.compile(r"// BEGIN GENERATED.*?// END GENERATED\n", re.S)
    if not pat.search(src):
        sys.exit(f"{args.update}: no generated block")
    with open(args.update, "w") as f:
        f.write(pat.sub(lambda _: text, src, count=1))


if __name__ == "__main__":
    main()
