#!/usr/bin/env bash
# Installs nabla into a temporary prefix and builds a small program against
# it twice: through CMake's find_package(nabla) and through pkg-config.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

mkdir -p "$tmp/app"
cat > "$tmp/app/main.c" <<'C'
#include <nabla/nabla.h>
#include <stdio.h>
int main(void)
{
    nb_tensor *t;
    if (nb_tensor_full(&t, NB_F64, 1, (int64_t[]){3}, 2.5)) return 1;
    nb_tensor *out = NULL;
    if (nb_op_run("exp", 1, &t, 0, NULL, 1, &out, NULL)) { fprintf(stderr, "%s\n", nb_last_error()); return 1; }
    printf("%.4f %d\n", nb_tensor_get(out, 0), nb_op_count() > 50);
    nb_tensor_release(t);
    nb_tensor_release(out);
    return 0;
}
C
cat > "$tmp/app/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(nabla REQUIRED)
add_executable(app main.c)
target_link_libraries(app nabla::nabla)
C
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
out=$("$tmp/app/build/app")
[ "$out" = "12.1825 1" ] || { echo "find_package build printed '$out'"; exit 1; }

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib64/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
cc -std=c11 "$tmp/app/main.c" -o "$tmp/app/app_pc" $(pkg-config --cflags nabla) $(pkg-config --libs --static nabla) -Wl,-rpath,"$(pkg-config --variable=libdir nabla)"
out=$("$tmp/app/app_pc")
[ "$out" = "12.1825 1" ] || { echo "pkg-config build printed '$out'"; exit 1; }
echo "1 passed, 0 failed"
