#!/bin/sh
# Plants one of the deliberate bugs of scripts/plants/ in the source, runs
# the check that must catch it, and takes the bug out again (also when the
# check fails or is interrupted). Exits 0 when the check went red as it
# should, 1 when the bug went unnoticed (docs/src/reliability.md, "Planted
# bugs").
#
#   sh scripts/plant.sh relaxed_count       # loom: a Relaxed completion count
#   sh scripts/plant.sh double_give         # loom: a buffer returned twice
#   sh scripts/plant.sh simd_tail           # ASan: a SIMD tail reads one past
#   sh scripts/plant.sh inplace_checkpoint  # crash test: save written in place
#
# The patch is applied to this checkout's files: build nothing else from it
# while a plant runs. A patch that no longer applies means the code moved:
# remake it (a one- or two-line change, described in the docs).
set -eu
cd "$(dirname "$0")/.."
name="${1:?relaxed_count, double_give, simd_tail or inplace_checkpoint}"
patch="scripts/plants/$name.patch"
[ -f "$patch" ] || { echo "no $patch" >&2; exit 2; }
git apply "$patch"
# Reverted once: the handler clears the traps (a signal would otherwise
# revert it twice, the second time failing on the clean file).
revert() {
    trap - EXIT INT TERM
    git apply -R "$patch"
}
trap revert EXIT
trap 'revert; exit 130' INT TERM
echo "planted $name; running its check" >&2
set +e
case "$name" in
relaxed_count) sh scripts/loom.sh loom_tests ;;
double_give) sh scripts/loom.sh memory::loom_tests ;;
# FORGE_CPU_CLASS=avx2: the planted tail is the AVX2 kernel's (an AVX-512
# machine would take the other one).
simd_tail) FORGE_CPU_CLASS=avx2 sh scripts/sanitize.sh address cpu::gemm ;;
inplace_checkpoint)
    cargo test --test suite reliability::crash::sigkill -- --ignored --nocapture
    ;;
*)
    echo "no check for $name" >&2
    exit 2
    ;;
esac
status=$?
set -e
if [ "$status" -eq 0 ]; then
    echo "GREEN: the planted $name went unnoticed" >&2
    exit 1
fi
echo "RED as expected: the planted $name was caught (exit $status)" >&2
