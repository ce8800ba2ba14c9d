# Sourced by the MPI script tests after setting $build and $src: exits,
# saying "skipped: ...", where mpirun or nabla's MPI support is missing, and
# sets the environment every mpirun of the tests wants. (Named .bash, not
# .sh, so that CMake does not take it for a test.)
if ! command -v mpirun >/dev/null; then
    echo "skipped: mpirun is not installed (make test installs openmpi-bin)"
    exit 0
fi
if ! "$build/nabla" --version | grep -q '^features:.* mpi'; then
    echo "skipped: this build has no MPI support (libopenmpi-dev was not found when it was configured)"
    exit 0
fi
# CI runs as root; Open MPI refuses that unless told. One thread per rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Under ASan: full stacks, so that Open MPI's own leaks (kept until exit)
# can be told from nabla's by tests/lsan_mpi.supp.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$src/tests/lsan_mpi.supp"
