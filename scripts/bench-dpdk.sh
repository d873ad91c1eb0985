#!/usr/bin/env bash
# Runtime benchmark: the router versus a testpmd-style io forwarder, both on
# one core over two net_null virtual ports (0 <-> 1), in the same run.
#
#   scripts/bench-dpdk.sh [seconds]
#
# The baseline is scripts/bench/iofwd.c (rx burst -> tx burst, exactly what
# `dpdk-testpmd --forward-mode=io` does per lcore), because Debian 12's dpdk
# package ships no dpdk-testpmd; if a dpdk-testpmd binary exists it runs too.
# The router runs `port-forward` (no other stage) and `nop + port-forward`.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
EAL='--no-huge -m 512 --no-pci --vdev net_null0,copy=0 --vdev net_null1,copy=0'
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$(mktemp -d)

cargo build --release -p router --features dpdk
# shellcheck disable=SC2046
cc -O3 -march=native -o "$OUT/iofwd" scripts/bench/iofwd.c $(pkg-config --cflags --libs libdpdk)

for run in 1 2; do
  echo "== round $run: baseline io forwarding (C, 1 core, ${SECS}s)"
  # shellcheck disable=SC2086
  "$OUT/iofwd" -l 1 $EAL --file-prefix=iofwd$$ -- "$SECS" 2>/dev/null | grep iofwd

  if command -v dpdk-testpmd >/dev/null; then
    echo "== round $run: dpdk-testpmd --forward-mode=io"
    # shellcheck disable=SC2086
    timeout --signal=INT $((SECS + 10)) dpdk-testpmd -l 0,1 $EAL --file-prefix=tpm$$ -- \
        --forward-mode=io --nb-cores=1 --stats-period "$SECS" --auto-start </dev/null \
        >"$OUT/testpmd.log" 2>&1 || true
    grep -E "Tx-pps" "$OUT/testpmd.log" | tail -2 || true
  fi

  for pipeline in port-forward nop; do
    {
      echo '[io]'
      echo 'backend = "dpdk"'
      echo '[io.dpdk]'
      printf 'eal_args = ['; for a in $EAL; do printf '"%s", ' "$a"; done; echo ']'
      echo '[workers]'
      echo 'cores = [1]'
      echo '[[ports]]'; echo 'id = 0'
      echo '[[ports]]'; echo 'id = 1'
      if [ "$pipeline" = nop ]; then echo '[[pipeline]]'; echo 'kind = "nop"'; fi
      echo '[[pipeline]]'
      echo 'kind = "port-forward"'
      echo 'map = [[0, 1], [1, 0]]'
      echo '[run]'
      echo "duration_ms = $((SECS * 1000))"
    } >"$OUT/router.toml"
    echo "== round $run: router ($pipeline), 1 core, ${SECS}s"
    "$TARGET/release/router" run --quiet "$OUT/router.toml" 2>/dev/null | grep -E "^packets:|router time"
  done
done
