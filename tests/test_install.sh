#!/usr/bin/env bash
# Installs nabla into a temporary prefix and builds small programs against
# it: a C one through CMake's find_package(nabla) and through pkg-config (the
# static library), and a C++ one the same two ways, the pkg-config build
# linking the shared library, which exports only the public API.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# The consumers use nabla's own toolchain: a library built with clang carries
# clang's OpenMP runtime, which a gcc link would not bring.
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cc=${cc:-cc}
case "$(basename "$cc")" in clang*) cxx=clang++ ;; *) cxx=c++ ;; esac

mkdir -p "$tmp/app"
cat > "$tmp/app/main.c" <<'C'
#include <nabla/nabla.h>
#include <stdio.h>
int main(void)
{
    nb_tensor *t;
    if (nb_tensor_full(&t, NB_F64, 1, (int64_t[]){3}, 2.5)) return 1;
    nb_tensor *out = NULL;
    if (nb_op_run("exp", NB_TENSORS(t), NB_NO_ATTRS, 1, &out)) { fprintf(stderr, "%s\n", nb_last_error()); return 1; }
    printf("%.4f %d\n", nb_tensor_get(out, 0), nb_op_count() > 50);
    nb_tensor_release(t);
    nb_tensor_release(out);
    return 0;
}
C
cat > "$tmp/app/main.cpp" <<'CPP'
// A C++ program that uses nabla through its C API: a static program with a
// trained parameter, and an eager op.
#include <nabla/nabla.h>
#include <cstdio>
#include <vector>

int main()
{
    nb_program *prog = nullptr, *startup = nullptr;
    nb_builder *b = nullptr;
    if (nb_program_new(&prog) || nb_program_new(&startup) || nb_builder_new_record(&b, prog, startup)) return 1;
    const int64_t xshape[] = {-1, 3};
    nb_value x = nb_layer_data(b, "x", NB_F64, 2, xshape);
    nb_value y = nb_reduce_sum(b, nb_tanh(b, nb_layer_fc(b, x, 2, "relu", nullptr)), 0, nullptr, false);
    if (nb_builder_status(b)) { std::fprintf(stderr, "%s\n", nb_builder_error(b)); return 1; }
    nb_executor *ex = nullptr;
    nb_scope *scope = nullptr;
    if (nb_executor_new(&ex) || nb_scope_new(&scope, nullptr)) return 1;
    if (nb_executor_run(ex, startup, scope, nb_feeds{0, nullptr}, nb_names{0, nullptr}, nullptr)) return 1;
    std::vector<double> data = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    const int64_t shape[] = {2, 3};
    nb_tensor *in = nullptr, *out = nullptr;
    if (nb_tensor_from_data(&in, NB_F64, 2, shape, data.data())) { std::fprintf(stderr, "%s\n", nb_last_error()); return 1; }
    nb_feed feed = {"x", in};
    const char *fetch = nb_value_name(y);
    if (nb_executor_run(ex, prog, scope, nb_feeds{1, &feed}, nb_names{1, &fetch}, &out)) { std::fprintf(stderr, "%s\n", nb_last_error()); return 1; }
    bool finite = nb_tensor_get(out, 0) == nb_tensor_get(out, 0);
    nb_tensor *e = nullptr;
    if (nb_op_run("exp", nb_tensors{1, &in}, nb_attrs{0, nullptr}, 1, &e)) return 1;
    std::printf("%.4f %d\n", nb_tensor_get(e, 0), finite ? 1 : 0);
    nb_tensor_release(e);
    nb_tensor_release(out);
    nb_tensor_release(in);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_builder_free(b);
    nb_program_free(prog);
    nb_program_free(startup);
    return 0;
}
CPP
cat > "$tmp/app/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(app C CXX)
find_package(nabla REQUIRED)
add_executable(app main.c)
target_link_libraries(app nabla::nabla)
add_executable(app_cxx main.cpp)
target_link_libraries(app_cxx nabla::nabla)
C
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
out=$("$tmp/app/build/app")
[ "$out" = "12.1825 1" ] || { echo "find_package build printed '$out'"; exit 1; }
out=$("$tmp/app/build/app_cxx")
[ "$out" = "1.1052 1" ] || { echo "find_package C++ build printed '$out'"; exit 1; }

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib64/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
"$cc" -std=c11 "$tmp/app/main.c" -o "$tmp/app/app_pc" $(pkg-config --cflags nabla) $(pkg-config --libs --static nabla) -Wl,-rpath,"$(pkg-config --variable=libdir nabla)"
out=$("$tmp/app/app_pc")
[ "$out" = "12.1825 1" ] || { echo "pkg-config build printed '$out'"; exit 1; }
"$cxx" -std=c++11 -Wall -Wextra -pedantic -Werror "$tmp/app/main.cpp" -o "$tmp/app/app_cxx_pc" $(pkg-config --cflags nabla) \
    $(pkg-config --libs nabla) -Wl,-rpath,"$(pkg-config --variable=libdir nabla)"
# (ldd's output is captured first: grep -q stopping early would make ldd
# die of SIGPIPE, which pipefail counts as a failure.)
libs=$(ldd "$tmp/app/app_cxx_pc")
case "$libs" in *libnabla.so*) ;; *) echo "the C++ pkg-config build did not link libnabla.so"; exit 1 ;; esac
out=$("$tmp/app/app_cxx_pc")
[ "$out" = "1.1052 1" ] || { echo "pkg-config C++ build printed '$out'"; exit 1; }
echo "1 passed, 0 failed"
