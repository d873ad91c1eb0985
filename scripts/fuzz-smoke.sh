#!/usr/bin/env bash
# Builds every cargo-fuzz target with the stable toolchain (no cargo-fuzz needed) and
# runs each for a bounded number of random inputs, so targets cannot rot and obvious
# crashes surface in CI. Real fuzzing: `cargo fuzz run -s none <target>` (see README).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
RUNS="${FUZZ_SMOKE_RUNS:-20000}"
# Its own target dir: the fuzz crate is a separate workspace.
cargo build --release --locked --bins --target-dir target
mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^fuzz$')
for t in "${targets[@]}"; do
  echo "fuzz smoke: $t ($RUNS runs)"
  ./target/release/"$t" -runs="$RUNS" -seed=1 -max_len=2048 >/dev/null 2>"target/$t.smoke.log" || {
    cat "target/$t.smoke.log"; echo "fuzz target $t failed"; exit 1; }
done
echo "fuzz smoke: ${#targets[@]} targets ok"
