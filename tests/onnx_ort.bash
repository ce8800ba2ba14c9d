# Sourced by the tests that run nabla's exports in ONNX Runtime:
# ort_install BUILD sets $ort_dir to a folder holding npm's onnxruntime-node
# (installed there, under the build folder, on first use; its CUDA download
# skipped), or leaves it empty and sets $ort_why when Node.js, npm or the
# registry is not to be had. (Named .bash, not .sh, so that CMake does not
# take it for a test.)
ort_install() {
    ort_dir=$(cd "$1" && pwd)/onnxruntime-node
    ort_why=
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        ort_why="Node.js and npm are needed (apt-get install nodejs npm)"
    elif [ ! -d "$ort_dir/node_modules/onnxruntime-node" ] &&
        ! ONNXRUNTIME_NODE_INSTALL_CUDA=skip timeout 300 npm install --prefix "$ort_dir" --no-audit --no-fund \
            --loglevel=error onnxruntime-node >"$1/onnxruntime-node.log" 2>&1; then
        ort_why="npm could not install onnxruntime-node (see $1/onnxruntime-node.log)"
    elif ! node -e "require('$ort_dir/node_modules/onnxruntime-node')" >/dev/null 2>&1; then
        ort_why="onnxruntime-node in $ort_dir does not load"
    fi
    if [ -n "$ort_why" ]; then ort_dir=; fi
}
