#!/bin/sh
# Mutation testing of forge's source files (docs/src/reliability.md,
# "Mutation testing"): cargo-mutants edits one file at a time, one mutant
# at a time, builds forge's unit tests and the suite with the test profile
# at opt-level 1 (incremental), and runs the tests matching FILTER; a
# mutant that no test notices is "missed".
#
#   TESTS=suite sh scripts/mutants.sh "margin" forge/src/ops/loss/margin.rs
#   sh scripts/mutants.sh "optim" forge/src/optim/sgd.rs forge/src/optim/clip.rs
#   LIST=1 sh scripts/mutants.sh "" forge/src/ops/norm/stats.rs  # list only
#
# FILTER is one or more libtest name filters (space-separated, a test runs
# when its path contains any of them), applied to the unit tests
# (`ops::loss::margin::...`) and to the suite (`ops::ops_margin_losses::...`);
# '' runs every test. Needs `cargo install cargo-mutants` (27.1.0 here).
#
# What makes it cheap (each point measured in docs/src/reliability.md):
# - One tree for every run: the checkout's files are copied to
#   target/mutants-tree (only those that differ, so the others keep their
#   times) and mutated
#   there in place, so the paths never change and the incremental build of
#   the previous run, and its baseline, are reused: after the first run a
#   baseline is a no-op build plus the filtered tests. This checkout is
#   never edited, so tests can be written while a run goes on; an
#   interrupted run leaves a mutant in the copy, which the next run's copy
#   puts back.
# - Several files in one invocation share its baseline.
# - The test profile at opt-level 1 and incremental for forge and the suite
#   only (environment overrides, not a profile of their own): the
#   dependencies keep the test profile's opt-level 3 override and its
#   hashes, so target/debug's dependency builds are reused (the script seeds
#   target/mutants-build/debug with a copy of target/debug the first
#   time) instead of a 40-minute cold build of the dependencies.
# - Only forge's unit tests and the suite are built (`--cargo-arg` reaches
#   the build and the test phase; cargo-mutants 27 drops
#   `--test-package forge-suite` when `--package forge` is the mutated
#   package); the second `--` is the test binaries' (cargo-mutants takes
#   the first as the start of cargo's arguments).
#
# Results: target/mutants-out/<first file>/mutants.out (outcomes.json,
# caught.txt, missed.txt, unviable.txt, timeout.txt).
set -eu
cd "$(dirname "$0")/.."
filter="$1"
shift
files=""
for f in "$@"; do files="$files -f $f"; done
top="$PWD"
target="${CARGO_TARGET_DIR:-$top/target}"
tree="$target/mutants-tree"
out="$target/mutants-out/$(echo "$1" | tr / _)"
mkdir -p "$tree" "$out"
if [ -n "${LIST:-}" ]; then
    # shellcheck disable=SC2086
    exec cargo mutants ${MUTANTS_ARGS:-} --list --package forge $files
fi
# Copy the files that differ (new ones, changed ones, and a mutant left by
# an interrupted run), with a new time so that cargo rebuilds them.
git ls-files -co --exclude-standard | while read -r f; do
    if ! cmp -s "$f" "$tree/$f" 2>/dev/null; then
        mkdir -p "$tree/$(dirname "$f")"
        cp "$f" "$tree/$f"
    fi
done
# Seed the mutants' target directory with the dependencies `cargo test`
# built (the first time only).
if [ ! -d "$target/mutants-build/debug" ] && [ -d "$target/debug" ]; then
    mkdir -p "$target/mutants-build"
    cp -a "$target/debug" "$target/mutants-build/"
fi
export CARGO_TARGET_DIR="$target/mutants-build"
export CARGO_PROFILE_TEST_OPT_LEVEL=0
export CARGO_PROFILE_TEST_INCREMENTAL=true
# TESTS=suite (or lib) builds and runs only the suite (or forge's unit
# tests): a mutant then costs one test binary's rebuild, not two.
case "${TESTS:-both}" in
    suite) targets="--cargo-arg=--test=suite" ;;
    lib) targets="--cargo-arg=--lib" ;;
    *) targets="--cargo-arg=--lib --cargo-arg=--test=suite" ;;
esac
# MUTANTS_ARGS adds cargo-mutants options, e.g. after a green baseline
# of the same tree and filter: "--baseline skip --timeout 300 --build-timeout 3000", or to
# rerun one mutant: "--re margin.rs:191".
# shellcheck disable=SC2086
cargo mutants ${MUTANTS_ARGS:-} --in-place --dir "$tree" --package forge $files \
    --output "$out" --no-shuffle --minimum-test-timeout 60 \
    --cargo-arg=--package=forge-suite $targets \
    -- -- --skip loom_tests $filter
