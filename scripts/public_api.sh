#!/bin/sh
# Regenerates forge/public-api.txt, the listing of forge's public API that
# tests/misc/public_api.rs checks, from forge/src. Run it after a deliberate
# change to the public API and commit the file with the change.
set -eu
cd "$(dirname "$0")/.."
FORGE_WRITE_PUBLIC_API=1 cargo test --test suite public_api -- --quiet
git --no-pager diff --stat -- forge/public-api.txt
