#!/bin/sh
# Mutation testing of one source file of forge (docs/src/reliability.md,
# "Mutation testing"): cargo-mutants edits the file one mutant at a time
# (a copy of the tree under target/mutants-tree, not this checkout), builds
# with the `mutants` profile and runs forge's unit tests plus the suite's
# tests matching FILTER; a mutant that no test notices is "missed".
#
#   sh scripts/mutants.sh forge/src/ops/loss.rs loss        # one file
#   sh scripts/mutants.sh forge/src/cpu/memory/classes.rs ''  # every test
#   LIST=1 sh scripts/mutants.sh forge/src/ops/norm.rs      # list only
#
# Needs `cargo install cargo-mutants`. Results go to
# target/mutants-out/<file>/mutants.out (outcomes.json, caught.txt, missed.txt,
# unviable.txt, timeout.txt). On 2 shared cores a file of 40 mutants takes
# about an hour: run one file at a time.
set -eu
cd "$(dirname "$0")/.."
file="$1"
filter="${2-}"
out="${CARGO_TARGET_DIR:-$PWD/target}/mutants-out/$(echo "$file" | tr / _)"
mkdir -p "$out"
if [ -n "${LIST:-}" ]; then
    exec cargo mutants --list --package forge -f "$file"
fi
# The tests: forge's unit tests and the suite (`tests/suite.rs`, package
# forge-suite), in the build as in the test phase (`--cargo-arg` reaches
# both; `--test-package forge-suite` is dropped by cargo-mutants 27 when
# `--package forge` selects the mutated package, and then `--test suite`
# fails on the unmutated tree). Nothing else (examples, the other test
# binaries, ui-tests) is built for a mutant.
# One target directory for every run (cargo-mutants builds a copy of the
# tree in a temporary folder): the dependencies are built once, at the
# first run, not again for each file.
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/mutants-build" \
    cargo mutants --package forge -f "$file" --output "$out" --jobs 1 \
    --cargo-arg=--package=forge-suite --cargo-arg=--lib --cargo-arg=--test=suite \
    -- -- --skip loom_tests $filter
