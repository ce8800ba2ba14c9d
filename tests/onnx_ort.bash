# Sourced by the tests that run nabla's exports in ONNX Runtime:
# ort_install BUILD sets $ort_dir to a folder holding npm's onnxruntime-node
# (installed there, under the build folder, on first use; its CUDA download
# skipped), or leaves it empty and sets $ort_why when Node.js, npm or the
# registry is not to be had. (Named .bash, not .sh, so that CMake does not
# take it for a test.)
# Two tests install at once under ctest -j: the second waits on the lock and
# then finds the package, rather than running npm into a half-made folder
# (which npm refuses, and the test was skipped). A failed install leaves no
# folder behind for the next try.
ort_install_locked() {
    local log
    log=$(cd "$1" && pwd)/onnxruntime-node.log
    (
        flock 9
        [ -d "$ort_dir/node_modules/onnxruntime-node" ] && exit 0
        # A package.json of its own: npm run from inside a build folder with
        # none otherwise fails with ENOENT on one (npm 11).
        rm -rf "$ort_dir" && mkdir -p "$ort_dir" && echo '{"private": true}' >"$ort_dir/package.json" &&
            cd "$ort_dir" && ONNXRUNTIME_NODE_INSTALL_CUDA=skip timeout 300 npm install --no-audit --no-fund \
                --loglevel=error onnxruntime-node >"$log" 2>&1 || { rm -rf "$ort_dir"; exit 1; }
    ) 9>"$1/onnxruntime-node.lock"
}

ort_install() {
    ort_dir=$(cd "$1" && pwd)/onnxruntime-node
    ort_why=
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        ort_why="Node.js and npm are needed (apt-get install nodejs npm)"
    elif ! ort_install_locked "$1"; then
        ort_why="npm could not install onnxruntime-node (see $1/onnxruntime-node.log)"
    elif ! node -e "require('$ort_dir/node_modules/onnxruntime-node')" >/dev/null 2>&1; then
        ort_why="onnxruntime-node in $ort_dir does not load"
    fi
    if [ -n "$ort_why" ]; then ort_dir=; fi
}

# ort_needs BUILD: ort_install, ending the test, saying why, when it gives
# no onnxruntime-node.
ort_needs() {
    ort_install "$1"
    if [ -z "$ort_dir" ]; then
        echo "skipped: $ort_why"
        exit 0
    fi
}

# ort_check MODEL DIR: nabla's export MODEL passes onnx.checker and holds
# no initializer or input that no node reads, and ONNX Runtime fed
# DIR/in<i>.npy gives DIR/nabla_out<j>.npy (onnx_ort.js); fails saying
# which did not hold.
ort_js=$(dirname "${BASH_SOURCE[0]}")/onnx_ort.js
ort_check() {
    /usr/bin/python3 - "$1" <<'PY' || return 1
import os, sys, onnx
m = onnx.load(sys.argv[1])
name = os.path.basename(sys.argv[1])
try:
    onnx.checker.check_model(m, full_check=True)
except Exception as e:
    sys.exit("%s: nabla's export fails onnx.checker: %s" % (name, e))
read = {i for n in m.graph.node for i in n.input}
idle = [v.name for v in list(m.graph.initializer) + list(m.graph.input) if v.name not in read]
if idle:
    sys.exit("%s: nabla's export holds values no node reads: %s" % (name, ", ".join(idle)))
PY
    node "$ort_js" "$ort_dir" "$1" "$2"
}
