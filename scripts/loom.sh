#!/bin/sh
# Model-checks the thread pool's spans, a task's completion count, join's
# hand-off between halves and the buffer pool's free lists under loom
# (docs/src/reliability.md, "Model checking"). Builds forge with
# `--cfg loom` (which swaps the primitives of src/cpu/sync.rs for loom's)
# in its own target directory, so the normal build is untouched, and runs
# only the model-check tests (`loom_tests` modules).
#
#   sh scripts/loom.sh            # all of them (about a minute once built)
#   sh scripts/loom.sh spans      # those whose path contains "spans"
set -eu
cd "$(dirname "$0")/.."
filter="${1:-loom_tests}"
RUSTFLAGS="${RUSTFLAGS:-} --cfg loom" \
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/loom" \
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    cargo test -p forge --lib -- "$filter" --test-threads=1
