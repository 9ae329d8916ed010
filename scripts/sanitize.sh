#!/bin/sh
# Runs forge's unit tests of the thread pool, the buffer pool and the CPU
# kernels under a sanitizer, or its scalar paths under Miri
# (docs/src/reliability.md, "Sanitizers and Miri"). Needs the nightly
# toolchain with the rust-src component (-Zbuild-std rebuilds the standard
# library instrumented) and, for `miri`, the miri component:
#
#   rustup component add rust-src miri --toolchain nightly
#
#   sh scripts/sanitize.sh thread  [FILTER...]   # ThreadSanitizer
#   sh scripts/sanitize.sh address [FILTER...]   # AddressSanitizer (+ leaks)
#   sh scripts/sanitize.sh miri    [FILTER...]   # Miri
#
# Each builds in its own target directory (target/san-thread, ...), so the
# normal build is untouched. The default filters are the tests the docs
# list as run.
set -eu
cd "$(dirname "$0")/.."
mode="${1:?thread, address or miri}"
shift
target_dir="${CARGO_TARGET_DIR:-$PWD/target}/san-$mode"
host=x86_64-unknown-linux-gnu
case "$mode" in
thread | address)
    if [ $# -eq 0 ]; then
        # The pool (spans, join, lingering workers), the buffer pool and
        # its reserve, the pooled kernels, and the kernels whose vector
        # paths are checked against the portable order.
        set -- cpu::threads cpu::memory cpu::pool cpu::gemm cpu::elementwise \
            cpu::reduce cpu::vmath cpu::conv cpu::scan
    fi
    # The tests' own profile (opt-level 3) with debug info for the reports;
    # TSan needs every thread's memory accesses instrumented, std's too.
    # Under ASan, `--cfg forge_asan` makes the buffer pool poison what no
    # one may read: a free block whole, and a taken block past the bytes
    # asked for (cpu/memory/freelists.rs, `asan`), so a read past the end of
    # a pooled tensor is reported as it is for an exactly sized allocation.
    flags="-Zsanitizer=$mode -Cdebuginfo=1"
    [ "$mode" = address ] && flags="$flags --cfg forge_asan"
    RUSTFLAGS="$flags" \
    RUSTDOCFLAGS="-Zsanitizer=$mode" \
    TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1 halt_on_error=1}" \
    CARGO_TARGET_DIR="$target_dir" \
        cargo +nightly test -Zbuild-std --target "$host" -p forge --lib -- "$@"
    ;;
miri)
    # -Zmiri-tree-borrows: rayon's crossbeam-epoch (under the executors'
    # pools) breaks Stacked Borrows' rules and is written for Tree Borrows
    # (crossbeam PR 996); under Stacked Borrows the first test with a
    # second thread stops in crossbeam_epoch::internal::Local::element_of.
    # -Zmiri-deterministic-floats: Miri otherwise perturbs exp, tanh and
    # the like by a few ulp on purpose, and the tests compare bits.
    flags="${MIRIFLAGS:--Zmiri-disable-isolation -Zmiri-tree-borrows -Zmiri-deterministic-floats}"
    if [ $# -eq 0 ]; then
        # Scalar code under the interpreter: storage, the pool's reserve
        # and classes, the spans, the tape (two of its three tests: the
        # third, a second-order gradient, ran over 22 min interpreted),
        # the safetensors and IDX readers; then the RNN cells' row blocks
        # (`Rows`) on an executor of 2 threads, whose rayon workers are
        # still parked when the test process ends: Miri's leak check
        # reports their crossbeam-epoch records (a `Local` and two sealed
        # bags, allocated in crossbeam), so that run ignores leaks.
        # The portable CPU class keeps every kernel on its scalar path;
        # the 2 MiB-block test zeroes 2 MiB element by element (> 8 min).
        FORGE_CPU_CLASS=portable MIRIFLAGS="$flags" CARGO_TARGET_DIR="$target_dir" \
            cargo +nightly miri test -p forge --lib -- cpu::memory::classes \
            cpu::memory::reserve cpu::memory::storage cpu::threads::spans \
            io::safetensors io::idx autograd::tests::dropping_the_loss \
            autograd::tests::an_intermediate --skip pooled_blocks_start_on_a_cache_line
        set -- ops::rnn_cell::sequence_tests
        flags="$flags -Zmiri-ignore-leaks"
    fi
    FORGE_CPU_CLASS=portable \
    MIRIFLAGS="$flags" \
    CARGO_TARGET_DIR="$target_dir" \
        cargo +nightly miri test -p forge --lib -- "$@"
    ;;
*)
    echo "usage: sh scripts/sanitize.sh thread|address|miri [FILTER...]" >&2
    exit 2
    ;;
esac
