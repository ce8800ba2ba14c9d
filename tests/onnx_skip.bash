# Sourced by the ONNX script tests: onnx_needs BUILD MODULES PACKAGES ends
# the test, saying what is missing, unless Debian's Python imports MODULES
# ("onnx, torch"; PACKAGES names them for the message) and BUILD has
# nabla's ONNX support. (Named .bash, not .sh, so that CMake does not take
# it for a test.)
onnx_needs() {
    if ! /usr/bin/python3 -c "import $2" 2>/dev/null; then
        echo "skipped: Debian's $3 are needed (make test installs them)"
        exit 0
    fi
    if ! grep -q '^NABLA_ONNX_PROTO:FILEPATH=/' "$1/CMakeCache.txt"; then
        echo "skipped: this build has no ONNX support (libonnx-dev was not found when it was configured)"
        exit 0
    fi
}
