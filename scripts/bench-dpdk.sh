#!/usr/bin/env bash
# Runtime benchmark: the router versus `dpdk-testpmd --forward-mode=io`, both on
# one forwarding core, back to back in the same run, over the same virtual ports.
#
#   scripts/bench-dpdk.sh [seconds per run] [rounds]
#
# dpdk-testpmd ships in Debian 12's `dpdk-dev` package (/usr/bin/dpdk-testpmd);
# the script installs `dpdk-dev libdpdk-dev` (apt, as root) if it is missing.
# Scenarios (every rate is the total over both ports, packets forwarded per second):
#   null   two net_null ports (0 <-> 1, empty frames): testpmd io vs the router's
#          `port-forward` and `nop + port-forward` (pure runtime overhead).
#   fair   net_pcap port 0 replays (infinite_rx) a capture of valid FAIR packets
#          (m = 2, 2048 flows) made by `router gen config/fair-transit.toml --group fair`;
#          port 1 receives nothing; both ports drop on TX. testpmd io forwards
#          0 -> 1; the router runs parse -> ipv4-forward -> fair-transit (every
#          packet verified fresh and marked) and forwards 0 -> 1.
#   sibra  the same with `--group reserved` of config/sibra-transit.toml
#          (2048 ephemeral reservations of class 24, each well within its rate at
#          the replay's speed, so the overuse monitor blacklists none) through
#          parse -> sibra-transit (SOF MAC check, monitor, CurrHop update).
# The router pins its Unix clock to the capture's time (`[io.dpdk] unix_time_s`)
# so that the looped packets stay fresh; net_pcap copies every replayed packet
# into a fresh mbuf, so each one is processed from scratch.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
ROUNDS=${2:-2}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
UNIX=1767225600 # the synthetic backend's virtual epoch, used by `router gen`

if ! command -v dpdk-testpmd >/dev/null || ! pkg-config --exists libdpdk 2>/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench-dpdk: dpdk-testpmd/libdpdk-dev missing and not root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq dpdk-dev libdpdk-dev pkg-config libclang-dev clang >/dev/null
fi

cargo build --release -p router --features dpdk
ROUTER="$TARGET/release/router"
"$ROUTER" gen config/fair-transit.toml --group fair --flows 2048 --out "$OUT/fair.pcap"
"$ROUTER" gen config/sibra-transit.toml --group reserved --flows 2048 --out "$OUT/sibra.pcap"
# A capture with no packets: port 1 receives nothing (and drops on TX).
printf '\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x01\x00\x00\x00' >"$OUT/empty.pcap"

EAL_BASE='--no-huge -m 1024 --no-pci'
eal_for() {
  case $1 in
    null) echo "$EAL_BASE --vdev net_null0,copy=0 --vdev net_null1,copy=0" ;;
    *) echo "$EAL_BASE --vdev net_pcap0,rx_pcap=$OUT/$1.pcap,infinite_rx=1 --vdev net_pcap1,rx_pcap=$OUT/empty.pcap" ;;
  esac
}

# testpmd prints per-port Tx-pps every stats period; sum the ports' last block.
testpmd_mpps() {
  local eal
  eal=$(eal_for "$1")
  # shellcheck disable=SC2086
  timeout --signal=INT $((2 * SECS + 4)) dpdk-testpmd -l 0,1 $eal --file-prefix=tpm$$ -- \
    --forward-mode=io --nb-cores=1 --total-num-mbufs=16384 --stats-period "$SECS" \
    --auto-start </dev/null >"$OUT/testpmd.log" 2>&1 || true
  grep -E "Tx-pps:" "$OUT/testpmd.log" | tail -2 | awk '{s += $2} END {printf "%.2f", s / 1e6}'
}

router_mpps() {
  local scenario=$1 pipeline=$2 eal
  eal=$(eal_for "$scenario")
  {
    echo '[io]'
    echo 'backend = "dpdk"'
    echo '[io.dpdk]'
    printf 'eal_args = ['
    for a in $eal; do printf '"%s", ' "$a"; done
    echo ']'
    echo 'mbufs = 16383'
    [ "$scenario" = null ] || echo "unix_time_s = $UNIX"
    echo '[workers]'
    echo 'cores = [1]'
    echo '[[ports]]'
    echo 'id = 0'
    echo '[[ports]]'
    echo 'id = 1'
    case $pipeline in
      nop | port-forward)
        [ "$pipeline" = nop ] && printf '[[pipeline]]\nkind = "nop"\n'
        printf '[[pipeline]]\nkind = "port-forward"\nmap = [[0, 1], [1, 0]]\n'
        ;;
      fair-transit)
        printf '[[pipeline]]\nkind = "parse"\n'
        printf '[[pipeline]]\nkind = "ipv4-forward"\nroutes = [{ prefix = "10.2.0.0/16", port = 1 }]\n'
        printf '[[pipeline]]\nkind = "fair-transit"\ndata_key = "000102030405060708090a0b0c0d0e0f"\n'
        printf 'keys_from = 1_767_225_600\nkeys_until = 1_767_312_000\n'
        ;;
      sibra-transit)
        printf '[[pipeline]]\nkind = "parse"\n'
        printf '[[pipeline]]\nkind = "sibra-transit"\nkey = "2b7e151628aed2a6abf7158809cf4f3c"\n'
        printf 'interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]\n'
        ;;
    esac
    echo '[run]'
    echo "duration_ms = $((SECS * 1000))"
  } >"$OUT/router.toml"
  "$ROUTER" run --quiet "$OUT/router.toml" >"$OUT/router.log" 2>&1 || { cat "$OUT/router.log" >&2; return 1; }
  # Forwarded packets over the worker's own run time.
  awk '/router time/ {for (i = 1; i <= NF; i++) if ($i == "after") t = $(i + 1)}
       /^packets:/ {tx = $5}
       END {printf "%.2f", tx / t / 1e6}' "$OUT/router.log"
  grep -qE "^packets:.* dropped 0 " "$OUT/router.log" || grep -E "^packets:|^  [a-z-]+ +in" "$OUT/router.log" >&2
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f%%", 100 * a / b}'; }

for round in $(seq "$ROUNDS"); do
  for scenario in null fair sibra; do
    case $scenario in
      null) pipelines="port-forward nop" ;;
      fair) pipelines="fair-transit" ;;
      sibra) pipelines="sibra-transit" ;;
    esac
    base=$(testpmd_mpps "$scenario")
    line="round $round  $scenario: testpmd io $base Mpps"
    for p in $pipelines; do
      r=$(router_mpps "$scenario" "$p")
      line="$line | router $p $r Mpps ($(ratio "$r" "$base"))"
    done
    echo "$line"
  done
done
