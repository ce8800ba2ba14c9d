"""PyTorch module exports for tests/test_onnx_torch.sh (issue 42).

    onnx_torch_gen.py OUT [NAME...]

For each module below (all of them, or those NAMEd) writes OUT/NAME.opN.onnx
(torch.onnx.export at opsets 13 and 17, eval mode, nothing folded, so that
the initializers are the module's own parameters under their own names) and
OUT/NAME.npz holding what tests/onnx_torch_check.c compares with:

    in<i>          the inputs, in the graph's order
    out<j>, r<j>   the eval-mode outputs and the weights of the scalar loss
                   L = sum_j sum(out<j> * r<j>)
    gin<i>         dL/d in<i> by torch autograd (float inputs)
    p:<name>       dL/d the parameter that the initializer <name> holds

and prints one line per module: its name and the ONNX ops of its export."""
import math
import sys

import numpy as np
import torch
from torch import nn

OPSETS = (13, 17)


class Chunk(nn.Module):
    def forward(self, x):
        a, b, c = x.chunk(3, dim=1)
        return a * torch.sigmoid(b) + c


class Split(nn.Module):
    def forward(self, x):
        a, b, c = x.split([1, 3, 2], dim=-1)
        return torch.cat([c * 2, torch.tanh(a), b.relu()], dim=-1)


class Recurrent(nn.Module):
    """Returns the sequence and the last hidden state (an LSTM's h and c)."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, h = self.rnn(x)
        return (y,) + (h if isinstance(h, tuple) else (h,))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, q, kv):
        y, w = self.mha(q, kv, kv)
        return y, w


class GPT2Block(nn.Module):
    """GPT-2's block as Hugging Face writes it: one qkv projection split in
    three, heads by view/transpose, a causal mask from a buffer sliced to the
    sequence length, torch.where, and the tanh approximation of GELU."""

    def __init__(self, d=16, heads=4, t_max=8):
        super().__init__()
        self.h, self.d = heads, d
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("bias", torch.tril(torch.ones(t_max, t_max, dtype=torch.bool)).view(1, 1, t_max, t_max))

    def heads(self, x):
        b, t, _ = x.size()
        return x.view(b, t, self.h, self.d // self.h).permute(0, 2, 1, 3)

    def forward(self, x):
        b, t, _ = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(self.d, dim=2)
        q, k, v = self.heads(q), self.heads(k), self.heads(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(v.size(-1))
        mask = self.bias[:, :, :t, :t]
        w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        a = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(b, t, self.d)
        x = x + self.c_proj(a)
        h = self.c_fc(self.ln_2(x))
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + self.mlp_proj(h)


def r(*shape):
    return torch.randn(*shape)


def cases():
    """(name, module, inputs)"""
    seq = nn.Sequential
    img = lambda c=3, s=8: r(2, c, s, s)
    yield "linear", nn.Linear(12, 7), (r(3, 5, 12),)
    yield "conv1d", nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=1), (r(2, 4, 15),)
    yield "conv2d", nn.Conv2d(3, 8, 3, stride=2, padding=1), (img(),)
    yield "conv2d_groups_dilated", nn.Conv2d(4, 8, 3, padding=2, dilation=2, groups=2), (img(4),)
    yield "conv2d_depthwise", nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4), (img(4, 7),)
    yield "conv3d", nn.Conv3d(2, 4, 3, padding=1, stride=(1, 2, 2)), (r(1, 2, 5, 6, 6),)
    yield "conv_transpose2d", nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1), (img(s=5),)
    yield "conv_transpose3d", nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                                                 output_padding=(1, 0, 0), dilation=(2, 1, 1), groups=2), (
        r(2, 4, 3, 4, 5),)
    yield "batchnorm1d", nn.BatchNorm1d(6), (r(4, 6),)
    yield "batchnorm2d", nn.BatchNorm2d(3), (img(),)
    yield "layernorm", nn.LayerNorm(10), (r(2, 4, 10),)
    yield "groupnorm", nn.GroupNorm(2, 6), (img(6),)
    yield "instancenorm2d", nn.InstanceNorm2d(3, affine=True), (img(),)
    yield "maxpool1d", nn.MaxPool1d(3, stride=2, padding=1), (r(2, 3, 11),)
    yield "maxpool2d", nn.MaxPool2d(2), (img(),)
    yield "maxpool2d_ceil_dilated", nn.MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True), (img(s=9),)
    yield "maxpool2d_indices", nn.MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True,
                                            return_indices=True), (img(s=9),)
    yield "maxpool3d_indices", nn.MaxPool3d(2, stride=(1, 2, 2), return_indices=True), (r(1, 2, 4, 6, 6),)
    yield "maxpool3d", nn.MaxPool3d(2), (r(1, 2, 4, 6, 6),)
    yield "avgpool1d", nn.AvgPool1d(3, stride=2, padding=1), (r(2, 3, 11),)
    yield "avgpool2d", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (img(s=9),)
    yield "avgpool3d", nn.AvgPool3d(2), (r(1, 2, 4, 6, 6),)
    yield "lppool2d", nn.LPPool2d(2, 2), (img(),)
    yield "adaptive_avgpool2d", nn.AdaptiveAvgPool2d(1), (img(),)
    yield "adaptive_avgpool2d_2x2", nn.AdaptiveAvgPool2d((2, 2)), (img(),)
    yield "adaptive_maxpool2d", nn.AdaptiveMaxPool2d(1), (img(),)
    yield "relu6", nn.ReLU6(), (r(3, 10) * 5,)
    yield "gelu", nn.GELU(), (r(3, 10),)
    yield "gelu_tanh", nn.GELU(approximate="tanh"), (r(3, 10),)
    yield "silu", nn.SiLU(), (r(3, 10),)
    yield "hardswish", nn.Hardswish(), (r(3, 10) * 4,)
    yield "hardsigmoid", nn.Hardsigmoid(), (r(3, 10) * 4,)
    yield "prelu", nn.PReLU(3), (img(),)
    yield "mish_elu_softplus", seq(nn.Mish(), nn.ELU(), nn.Softplus(), nn.LeakyReLU(0.2)), (r(3, 10),)
    yield "embedding", nn.Embedding(20, 8), (torch.randint(0, 20, (3, 5)),)
    yield "chunk", Chunk(), (r(2, 6, 4),)
    yield "split", Split(), (r(2, 3, 6),)
    yield "upsample_nearest", nn.Upsample(scale_factor=2, mode="nearest"), (img(s=4),)
    yield "upsample_bilinear", nn.Upsample(scale_factor=2, mode="bilinear"), (img(s=4),)
    yield "upsample_bilinear_aligned", nn.Upsample(size=(7, 9), mode="bilinear", align_corners=True), (img(s=4),)
    yield "multihead_attention", Attention(), (r(2, 5, 16), r(2, 7, 16))
    yield "transformer_encoder_layer", nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True), (
        r(2, 6, 16),)
    yield "lstm", Recurrent(nn.LSTM(6, 8, batch_first=True)), (r(2, 5, 6),)
    yield "lstm_2layer_bidirectional", Recurrent(nn.LSTM(6, 8, num_layers=2, bidirectional=True)), (r(5, 2, 6),)
    yield "gru", Recurrent(nn.GRU(6, 8, batch_first=True)), (r(2, 5, 6),)
    yield "gpt2_block", GPT2Block(), (r(2, 6, 16),)


def randomise_statistics(module):
    """Running statistics and affine terms that are not the defaults, so that
    an import reading the wrong one shows."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
            if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm,
                              nn.modules.instancenorm._InstanceNorm)) and m.weight is not None:
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
            if isinstance(m, nn.PReLU):
                m.weight.uniform_(0.05, 0.5)


def write(out, name, module, inputs):
    import onnx
    module.eval()
    randomise_statistics(module)
    for opset in OPSETS:
        torch.onnx.export(module, inputs, "%s/%s.op%d.onnx" % (out, name, opset), opset_version=opset,
                          do_constant_folding=False, input_names=["in%d" % i for i in range(len(inputs))])
    m = onnx.load("%s/%s.op%d.onnx" % (out, name, OPSETS[-1]))
    inits = {t.name for t in m.graph.initializer}
    xs = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ys = module(*xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    arrays = {}
    loss = 0
    for j, y in enumerate(ys):
        arrays["out%d" % j] = y.detach().numpy()
        # Integer outputs (MaxPool's indices) have no gradient and come
        # last, so the loss weighs the float ones before them.
        if y.is_floating_point():
            w = torch.randn(y.shape)
            loss = loss + (y * w).sum()
            arrays["r%d" % j] = w.numpy()
    params = [(n, p) for n, p in module.named_parameters() if n in inits]
    wrt = [x for x in xs if x.requires_grad] + [p for _, p in params]
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    k = 0
    for i, x in enumerate(xs):
        arrays["in%d" % i] = x.detach().numpy()
        if x.requires_grad:
            arrays["gin%d" % i] = grads[k].numpy()
            k += 1
    for (n, p), g in zip(params, grads[k:]):
        arrays["p:" + n] = (g if g is not None else torch.zeros_like(p)).numpy()
    missing = [n for n, _ in module.named_parameters() if n not in inits]
    if missing:
        raise SystemExit("%s: parameters not among the initializers: %s" % (name, " ".join(missing)))
    np.savez("%s/%s.npz" % (out, name), **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
    ops = sorted({n.op_type for n in m.graph.node})
    print("%s: %d params; ops %s" % (name, len(params), " ".join(ops)))


def main():
    out, names = sys.argv[1], set(sys.argv[2:])
    torch.manual_seed(0)
    for name, module, inputs in cases():
        if not names or name in names:
            write(out, name, module, inputs)


if __name__ == "__main__":
    main()
