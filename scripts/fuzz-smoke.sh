#!/usr/bin/env bash
# Builds every cargo-fuzz target with the stable toolchain (no cargo-fuzz needed) and
# runs each for a bounded number of random inputs, so targets cannot rot and obvious
# crashes surface in CI. Real fuzzing needs cargo-fuzz (`cargo install cargo-fuzz`):
# `cargo fuzz run -s none <target>`, see fuzz/README.md.
# Everything this script writes stays in fuzz/target/ (gitignored): it keeps no
# corpus, and a crashing input lands in fuzz/target/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
RUNS="${FUZZ_SMOKE_RUNS:-20000}"
# `router_config` parses, checks and builds a whole router per input (a few ms
# each): fewer runs, long inputs from the start (several edits each, without
# coverage feedback to grow them), and the memory limit its budget assumes.
CONFIG_RUNS="${FUZZ_SMOKE_CONFIG_RUNS:-2000}"
# Every example configuration must be a seed of `router_config`.
for f in ../config/*.toml; do
  grep -q "\"../../config/$(basename "$f")\"" fuzz_targets/router_config.rs || {
    echo "fuzz smoke: config/$(basename "$f") is missing from fuzz_targets/router_config.rs"; exit 1; }
done
# Its own target dir: the fuzz crate is a separate workspace.
cargo build --release --locked --bins --target-dir target
mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^fuzz$')
for t in "${targets[@]}"; do
  runs="$RUNS"
  opts=(-max_len=2048)
  if [ "$t" = router_config ]; then
    runs="$CONFIG_RUNS"
    opts=(-max_len=256 -len_control=0 -rss_limit_mb=1024)
  fi
  echo "fuzz smoke: $t ($runs runs)"
  # libFuzzer writes crashing inputs to the working directory unless told otherwise.
  mkdir -p "target/artifacts/$t"
  ./target/release/"$t" -runs="$runs" -seed=1 -artifact_prefix="target/artifacts/$t/" "${opts[@]}" \
    >/dev/null 2>"target/$t.smoke.log" || {
    cat "target/$t.smoke.log"; echo "fuzz target $t failed (input in fuzz/target/artifacts/$t/)"; exit 1; }
done
echo "fuzz smoke: ${#targets[@]} targets ok"
