#!/usr/bin/env bash
# Scaling of the synthetic backend: each example configuration at 1 and 2
# workers (or $WORKERS), the same offered traffic (virtual pacing, rates are
# totals), reporting the wall-clock processing rate the run summary prints.
#
#   scripts/bench-workers.sh [virtual seconds, default 20] [config ...]
#   WORKERS="1 2 4" scripts/bench-workers.sh 2 config/default.toml
#
# The generator runs inside each worker, so this measures generation plus the
# pipeline; on a machine with as many CPUs as workers the numbers include the
# control and slow-path threads competing for them.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
shift 1 2>/dev/null || true
CONFIGS=${*:-config/default.toml config/fair-transit.toml config/sibra-transit.toml config/zlane-border.toml config/flowpolice-edge.toml config/scion-border.toml}
WORKERS=${WORKERS:-1 2}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p router
for cfg in $CONFIGS; do
  line="$(basename "$cfg" .toml):"
  first=""
  for n in $WORKERS; do
    out=$("$TARGET/release/router" run --quiet --workers "$n" --duration "${SECS}s" "$cfg" 2>&1)
    # "packets: rx N ... (processing 1.23 Mpps wall)"
    rate=$(echo "$out" | sed -n 's/.*(processing \([0-9.]*\) \([kM]\)pps wall).*/\1 \2/p' |
      awk '{printf "%.3f", ($2 == "k") ? $1 / 1000 : $1}')
    line="$line  $n worker(s) $rate Mpps"
    if [ -z "$first" ]; then first=$rate; else
      line="$line (x$(awk -v a="$rate" -v b="$first" 'BEGIN {printf "%.2f", a / b}'))"
    fi
  done
  echo "$line"
done
