#!/usr/bin/env bash
# Coverage-guided fuzzing of every cargo-fuzz target in turn, SECS seconds each
# (default 60), with AddressSanitizer (needs the nightly toolchain and
# cargo-fuzz). Not part of the test command: CI runs scripts/fuzz-smoke.sh.
# Corpora grow in fuzz/corpus/<target>, crashes land in fuzz/artifacts/<target>/.
#
#   SECS=300 bash scripts/fuzz-all.sh               # every target, 5 min each
#   SECS=600 bash scripts/fuzz-all.sh sibra_stage   # chosen targets
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECS="${SECS:-60}"
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^fuzz$')
fi
cargo +nightly fuzz build -O
failed=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log="artifacts/$t/last-run.log"
  if cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$SECS" -max_len=2048 \
      >"$log" 2>&1; then
    echo "$t: ok, $(grep -Eo 'Done [0-9]+ runs' "$log" | tail -1)"
  else
    echo "$t: FAILED (see fuzz/$log and fuzz/artifacts/$t/)"
    failed+=("$t")
  fi
done
[ "${#failed[@]}" -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
echo "all ${#targets[@]} targets ok"
