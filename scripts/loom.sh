#!/bin/sh
# Model-checks the thread pool's spans, a task's completion count and join's
# hand-off between halves under loom (docs/src/reliability.md, "Model
# checking the thread pool"). Builds forge with
# `--cfg loom` (which swaps the primitives of src/cpu/sync.rs for loom's)
# in its own target directory, so the normal build is untouched, and runs
# only the model-check tests (`loom_tests` modules).
#
#   sh scripts/loom.sh            # all of them (about a minute once built)
#   sh scripts/loom.sh join::loom_tests   # those whose path contains it
set -eu
cd "$(dirname "$0")/.."
filter="${1:-loom_tests}"
RUSTFLAGS="${RUSTFLAGS:-} --cfg loom" \
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/loom" \
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" \
    cargo test -p forge --lib -- "$filter" --test-threads=1
