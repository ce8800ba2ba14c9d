#!/usr/bin/env bash
# ONNX against the rest of the world (Debian's python3-onnx and
# python3-torch; skipped, saying so, where they or nabla's ONNX support are
# missing):
#  - the MNIST MLP and CNN trained by the examples, exported by
#    `nabla onnx-export`, pass onnx.checker; an evaluator written here on
#    torch.nn.functional runs the exported graph and gives nabla's outputs;
#    imported back into nabla they give the same outputs again;
#  - an MLP and a LeNet (with batch norm) built in PyTorch and exported by
#    torch.onnx.export give PyTorch's outputs in nabla (to 1e-5), also with
#    their weights in an external-data file, and fine-tune on MNIST there
#    (the loss falls); and one that flattens with x.view(x.size(0), -1),
#    which the exporter writes as a shape computed at run time.
set -euo pipefail
build=$1
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if ! "$py" -c 'import onnx, torch' 2>/dev/null; then
    echo "skipped: Debian's python3-onnx and python3-torch are needed (make test installs them)"
    exit 0
fi
if ! grep -q '^NABLA_ONNX_PROTO:FILEPATH=/' "$build/CMakeCache.txt"; then
    echo "skipped: this build has no ONNX support (libonnx-dev was not found when it was configured)"
    exit 0
fi
check=$build/tests/onnx_check
# MNIST: in the build's data folder (CMake's NABLA_DATA_DIR).
data=$(sed -n 's/^NABLA_DATA_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
export NABLA_DATA=$data

# ---- nabla -> ONNX ------------------------------------------------------------
# The CNN takes a minute to train; under the sanitizers (many times slower)
# only the MLP goes through here (test_onnx.c exports a LeNet there too).
sanitized=0
grep -qE '^NABLA_(SANITIZE|TSAN):BOOL=ON' "$build/CMakeCache.txt" && sanitized=1
# Under the sanitizers an epoch of all MNIST took two and a half minutes
# (ThreadSanitizer): the MLP trains on its first 6000 images there, and is
# tested on the first 1000. What is checked is the export, not the accuracy.
train_data=$data
if [ $sanitized = 1 ]; then
    train_data=$out/mnist-part
    mkdir "$train_data"
    "$py" - "$data/mnist" "$train_data" <<'EOF'
import gzip, struct, sys
src, dst = sys.argv[1:]
for prefix, n in (("train", 6000), ("t10k", 1000)):
    with gzip.open("%s/%s-images-idx3-ubyte.gz" % (src, prefix)) as f:
        magic, total, rows, cols = struct.unpack(">IIII", f.read(16))
        pixels = f.read(n * rows * cols)
    with open("%s/%s-images-idx3-ubyte" % (dst, prefix), "wb") as f:
        f.write(struct.pack(">IIII", magic, n, rows, cols) + pixels)
    with gzip.open("%s/%s-labels-idx1-ubyte.gz" % (src, prefix)) as f:
        magic, total = struct.unpack(">II", f.read(8))
        labels = f.read(n)
    with open("%s/%s-labels-idx1-ubyte" % (dst, prefix), "wb") as f:
        f.write(struct.pack(">II", magic, n) + labels)
EOF
fi
for model in mlp cnn; do
    if [ $model = cnn ] && [ $sanitized = 1 ]; then
        echo "cnn: skipped under the sanitizers (a minute of training in a plain build)"
        continue
    fi
    args=(--epochs 1 --quiet --data "$train_data" --checkpoint "$out/$model.ckpt" --save-program "$out/$model.nbp")
    [ $model = cnn ] && args+=(--batch 128)
    "$build/examples/mnist_$model" "${args[@]}" | tail -1
    "$build/nabla" onnx-export "$out/$model.nbp" "$out/$model.ckpt" --fetch logits -o "$out/$model.onnx"
    "$py" - "$out" <<'EOF'
import sys, numpy as np
np.random.seed(0)
x = np.random.rand(16, 784).astype(np.float32)
x.tofile(sys.argv[1] + "/x.f32")
EOF
    "$check" run "$out/$model.nbp" "$out/$model.ckpt" images logits "$out/x.f32" 16,784 "$out/$model.want.f32"
    "$py" - "$out/$model.onnx" "$out/x.f32" "$out/$model.want.f32" <<'EOF'
import sys, numpy as np, onnx, torch
import torch.nn.functional as F
from onnx import numpy_helper
path, xin, want = sys.argv[1:]
m = onnx.load(path)
onnx.checker.check_model(m, full_check=True)
assert m.opset_import[0].version == 13, m.opset_import
g = m.graph
assert g.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
env = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in g.initializer}
env[g.input[0].name] = torch.from_numpy(np.fromfile(xin, np.float32).reshape(16, 784))
def attr(n, name, default=None):
    for a in n.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default
for n in g.node:
    i = [env[k] for k in n.input]
    if n.op_type == "MatMul": y = i[0] @ i[1]
    elif n.op_type == "Add": y = i[0] + i[1]
    elif n.op_type == "Relu": y = torch.relu(i[0])
    elif n.op_type == "Identity": y = i[0]
    elif n.op_type == "Reshape":
        shape = [int(s) if s != 0 else i[0].shape[k] for k, s in enumerate(i[1].tolist())]
        y = i[0].reshape(shape)
    elif n.op_type == "Conv":
        p = attr(n, "pads")
        assert p[0] == p[2] and p[1] == p[3]
        y = F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None, stride=attr(n, "strides"), padding=p[:2],
                     dilation=attr(n, "dilations"), groups=attr(n, "group"))
    elif n.op_type == "MaxPool":
        p = attr(n, "pads")
        y = F.max_pool2d(i[0], attr(n, "kernel_shape"), attr(n, "strides"), p[:2], ceil_mode=bool(attr(n, "ceil_mode")))
    else: raise SystemExit("the reference evaluator has no " + n.op_type)
    env[n.output[0]] = y
got = env[g.output[0].name].numpy().ravel()
ref = np.fromfile(want, np.float32)
d = np.abs(got - ref).max()
print("%s: onnx.checker passed; evaluated by torch.nn.functional: largest difference %.3g" % (path.split("/")[-1], d))
assert d < 1e-4, d
EOF
    "$check" compare "$out/$model.onnx" "$out/x.f32" 16,784 "$out/$model.want.f32" 1e-5
done

# ---- PyTorch -> ONNX -> nabla ------------------------------------------------------
"$py" - "$out" <<'EOF'
import sys, numpy as np, onnx, torch
from torch import nn
out = sys.argv[1]
torch.manual_seed(0)
mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 10))
lenet = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(6, 16, 5), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                      nn.Linear(400, 120), nn.ReLU(), nn.Dropout(0.2), nn.Linear(120, 84), nn.Sigmoid(),
                      nn.Linear(84, 10), nn.LogSoftmax(dim=1))
# Batch norm with statistics that are not the defaults.
with torch.no_grad():
    lenet[1].running_mean.uniform_(-0.5, 0.5); lenet[1].running_var.uniform_(0.5, 2.0)
    lenet[1].weight.uniform_(0.5, 1.5); lenet[1].bias.uniform_(-0.2, 0.2)
class ViewNet(nn.Module):
    """Flattens with x.view(x.size(0), -1): the exporter writes the batch size as
    a shape computed at run time (Shape, Gather, Unsqueeze, Concat, Reshape)."""
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 4, 5, stride=2), nn.Linear(4 * 12 * 12, 10)
    def forward(self, x):
        h = torch.relu(self.conv(x))
        return self.fc(h.view(h.size(0), -1))
x = torch.rand(16, 1, 28, 28)
for name, model in (("torch_mlp", mlp), ("torch_lenet", lenet), ("torch_viewnet", ViewNet())):
    model.eval()
    # PRESERVE keeps batch norm a node of its own (torch folds it into the
    # convolution otherwise), so that its import is tested.
    torch.onnx.export(model, x, "%s/%s.onnx" % (out, name), opset_version=13, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    with torch.no_grad():
        model(x).numpy().astype(np.float32).tofile("%s/%s.want.f32" % (out, name))
    m = onnx.load("%s/%s.onnx" % (out, name))
    print("%s: %s" % (name, " ".join(n.op_type for n in m.graph.node)))
    onnx.save_model(m, "%s/%s_ext.onnx" % (out, name), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="%s.weights" % name, size_threshold=0)
x.numpy().tofile(out + "/x28.f32")
EOF
for name in torch_mlp torch_lenet torch_viewnet; do
    "$check" compare "$out/$name.onnx" "$out/x28.f32" 16,1,28,28 "$out/$name.want.f32" 1e-5
    "$check" compare "$out/${name}_ext.onnx" "$out/x28.f32" 16,1,28,28 "$out/$name.want.f32" 1e-5
done
"$check" finetune "$out/torch_mlp.onnx" 1,28,28 60
"$check" finetune "$out/torch_lenet.onnx" 1,28,28 60
echo "onnx: every check passed"
