#!/usr/bin/env bash
# Runtime benchmark: the router versus `dpdk-testpmd --forward-mode=io`, both on
# one forwarding core, back to back in the same run, over the same virtual ports.
#
#   scripts/bench-dpdk.sh [seconds per run] [rounds] [scenario ...]
#   scripts/bench-dpdk.sh 3 1 sizes            # FAIR BM-4 / BM-5 frame-size sweep
#   SIZES="74 1518" scripts/bench-dpdk.sh 3 1 sizes
#   WORKERS="1 2" scripts/bench-dpdk.sh 3 1    # scaling: 1 and 2 forwarding cores
#
# WORKERS (default 1) lists forwarding-core counts: for each count n, testpmd
# runs with n forwarding cores and n RX/TX queues per port, and the router with
# n workers (one RX/TX queue pair each per port). With more than one count, each
# scenario also prints the router's speed-up over its first count and its share
# of testpmd at each count. The ports get one RX queue per core (net_null any
# number; net_pcap one `rx_pcap` per queue, all replaying the same capture).
# On a machine with exactly n CPUs the main lcore of testpmd shares CPU 0 with a
# forwarding lcore (it only prints statistics).
#
# dpdk-testpmd ships in Debian 12's `dpdk-dev` package (/usr/bin/dpdk-testpmd);
# the script installs `dpdk-dev libdpdk-dev` (apt, as root) if it is missing.
# Scenarios (default: null fair sibra zlane fp scion; every rate is the total over both
# ports, packets forwarded per second):
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
#   zlane  the same with `--group guaranteed-as` of config/zlane-border.toml (EPIC-Z
#          packets of one AS through its gateway, HVFs under the router's SV)
#          through parse -> zlane-classify (HVF check, class G within the AS's
#          rate of 6 Gbit/s, the most its 8-byte bucket holds, A above it)
#          -> scion-forward (hop-field MAC, interface 2 -> 3).
#   fp     the same with FlowPolice packets of config/flowpolice-edge.toml: one
#          request per flow (`--group requests`, puzzles solved at level 4), then
#          eight regular packets per flow (`--group regular`) carrying the
#          capability the router stamps on the flow's request, 512 flows
#          (4608 frames: net_pcap holds a looped capture in mbufs), through
#          parse -> ipv4-forward -> flowpolice (a request: puzzle check and
#          flow lookup; a regular packet: capability MAC, feedback, window
#          count). The stage runs on `clock = "unix"`, so with the pinned Unix
#          clock every flow stays in the first half of its first period and
#          the capture's capabilities stay valid in every loop; a flow is
#          restamped until it has been issued K_th = 128 packet IDs (its first
#          16 loops), as a flow sending more than K_th packets per period is.
#   scion  the same with standard-path SCION packets (`--group plain-scion` of
#          config/scion-border.toml, 2048 flows) through parse -> scion-forward
#          (hop-field MAC, SegID and CurrHF update, interface 2 -> 3) and through
#          the whole scion-border pipeline of that file (parse -> sibra-transit
#          -> zlane-classify -> scion-forward: SIBRA and EPIC-Z stages pass the
#          packet on as class U).
#   sizes  FAIR spec §7.7 BM-4 and BM-5: for each frame size in $SIZES
#          (default 74 128 256 512 1024 1518 bytes on the wire, FCS included,
#          so the captures hold size - 4 bytes; made with `router gen
#          --frame-len`), FAIR packets as in `fair` through testpmd io, the
#          router's baseline `parse -> ipv4-forward` and the same plus
#          `fair-transit`. "1 port": port 0 replays, forwards to port 1.
#          "2 ports" (BM-5, one core serving two ports): both ports replay,
#          port 0's packets (to 10.2/16) leave on 1, port 1's (to 10.1/16) on 0.
#          Gbit/s = Mpps x size x 8 (frame bits; add 20 B per frame for the
#          preamble and inter-frame gap of the line rate). The FAIR packets are
#          IPv4 with the FAIR shim (the runtime's `fair` template), so 74 B is
#          the sweep's smallest point, not the IPv6 minimum of the spec; the
#          68 B `PaperBytes` layout is IPv6-only and not generated here.
# The router pins its Unix clock to the capture's time (`[io.dpdk] unix_time_s`)
# so that the looped packets stay fresh; net_pcap copies every replayed packet
# into a fresh mbuf, so each one is processed from scratch (and the copy, which
# grows with the frame size, is the "I/O" of these virtual ports: neither
# net_null nor net_pcap is I/O bound the way a NIC at line rate is).
#
# Memory: by default both programs run with `--no-huge` (4 KiB pages, nothing
# to set up). HUGEPAGES=1 runs both on 2 MiB hugepages instead, as a production
# deployment would: it needs 1 GiB of free hugepages on a mounted hugetlbfs, and
# reserves and mounts them itself when run as root (an existing reservation
# is never shrunk).
#
# With two or more rounds the script ends with a summary per pipeline: the
# median and quartiles of the router's share of testpmd over the rounds, and,
# for the pipelines with a goal (port-forward 85 %, fair-transit 70 %,
# sibra-transit 60 %, zlane-border 50 %), how many rounds reached it and the
# one-sided sign test's p: the chance of at least that many if the median
# share were the goal. Each round's ratio compares two runs made one after the
# other; on a shared host one round's ratio can be tens of points off, so the
# median over many rounds is the figure to judge.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
ROUNDS=${2:-2}
shift 2 2>/dev/null || shift $#
SCENARIOS=${*:-null fair sibra zlane fp scion}
SIZES=${SIZES:-74 128 256 512 1024 1518}
WORKERS=${WORKERS:-1}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# shellcheck source=scripts/lib/replay.sh
source scripts/lib/replay.sh # replay_captures, replay_pipeline
UNIX=$REPLAY_UNIX

if ! command -v dpdk-testpmd >/dev/null || ! pkg-config --exists libdpdk 2>/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench-dpdk: dpdk-testpmd/libdpdk-dev missing and not root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq dpdk-dev libdpdk-dev pkg-config libclang-dev clang >/dev/null
fi

# 1 GiB of free 2 MiB hugepages on a mounted hugetlbfs (HUGEPAGES=1); as
# root, reserves and mounts what is missing.
hugepages_ready() {
  local sys=/sys/kernel/mm/hugepages/hugepages-2048kB free need=512
  free=$(cat "$sys/free_hugepages" 2>/dev/null || echo 0)
  if [ "$free" -lt "$need" ] && [ "$(id -u)" -eq 0 ] && [ -w "$sys/nr_hugepages" ]; then
    echo $(($(cat "$sys/nr_hugepages") + need - free)) >"$sys/nr_hugepages"
    free=$(cat "$sys/free_hugepages")
  fi
  if ! grep -q ' hugetlbfs ' /proc/mounts && [ "$(id -u)" -eq 0 ]; then
    mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages
  fi
  if [ "$free" -lt "$need" ] || ! grep -q ' hugetlbfs ' /proc/mounts; then
    echo "bench-dpdk: HUGEPAGES=1 needs $need free 2 MiB hugepages ($free free) on a mounted hugetlbfs; run as root or reserve them" >&2
    exit 1
  fi
}

case ${HUGEPAGES:-0} in
  1)
    hugepages_ready
    EAL_BASE='-m 1024 --no-pci --huge-unlink'
    ;;
  0) EAL_BASE='--no-huge -m 1024 --no-pci' ;;
  *)
    echo "bench-dpdk: HUGEPAGES is 0 or 1, not $HUGEPAGES" >&2
    exit 2
    ;;
esac

cargo build --release -p router --features dpdk
ROUTER="$TARGET/release/router"
replay_captures "$ROUTER" "$OUT"
case " $SCENARIOS " in
  *" sizes "*)
    for size in $SIZES; do
      # Port 0: 10.1/16 -> 10.2/16 (routed to port 1); port 1: the reverse.
      "$ROUTER" gen config/fair-transit.toml --group fair --flows 2048 \
        --frame-len $((size - 4)) --out "$OUT/fair-$size.pcap" 2>/dev/null
      "$ROUTER" gen config/fair-transit.toml --group fair --flows 2048 \
        --param 'src="10.2.0.1"' --param 'dst="10.1.0.1"' \
        --frame-len $((size - 4)) --out "$OUT/fair-$size-rev.pcap" 2>/dev/null
    done
    ;;
esac
# `rx_pcap=FILE` once per queue ($2 queues, default 1).
rx_queues() {
  local i out=""
  for i in $(seq "${2:-1}"); do out="$out,rx_pcap=$1"; done
  echo "${out#,}"
}
# Scenario names: null, fair, sibra, fair-<size> (one port replays),
# fair-<size>-2p (both ports replay). $2: queues per port (default 1).
eal_for() {
  local q=${2:-1}
  case $1 in
    null) echo "$EAL_BASE --vdev net_null0,copy=0 --vdev net_null1,copy=0" ;;
    *-2p)
      local c=${1%-2p}
      echo "$EAL_BASE --vdev net_pcap0,$(rx_queues "$OUT/$c.pcap" "$q"),infinite_rx=1 --vdev net_pcap1,$(rx_queues "$OUT/$c-rev.pcap" "$q"),infinite_rx=1"
      ;;
    *) echo "$EAL_BASE --vdev net_pcap0,$(rx_queues "$OUT/$1.pcap" "$q"),infinite_rx=1 --vdev net_pcap1,$(rx_queues "$OUT/empty.pcap" "$q")" ;;
  esac
}

# testpmd prints per-port Tx-pps every stats period; sum the ports' last block.
# $2: forwarding cores (default 1), each with its own RX/TX queue per port.
testpmd_mpps() {
  local eal n=${2:-1} lcores
  eal=$(eal_for "$1" "$n")
  # Main lcore 0 on CPU 0; forwarding lcores 1..n on CPUs 1..n, the last
  # one wrapping to CPU 0 when the machine has only n CPUs.
  lcores="0@0"
  for i in $(seq "$n"); do lcores="$lcores,$i@$((i % $(nproc)))"; done
  # shellcheck disable=SC2086
  timeout --signal=INT $((2 * SECS + 4)) dpdk-testpmd --lcores "$lcores" $eal --file-prefix=tpm$$ -- \
    --forward-mode=io --nb-cores="$n" --rxq="$n" --txq="$n" --total-num-mbufs=$((16384 * n)) \
    --stats-period "$SECS" --auto-start </dev/null >"$OUT/testpmd.log" 2>&1 || true
  grep -E "Tx-pps:" "$OUT/testpmd.log" | tail -2 | awk '{s += $2} END {printf "%.2f", s / 1e6}'
}

# $3: workers (default 1): one on CPU 1, two on CPUs 0 and 1, and so on.
router_mpps() {
  local scenario=$1 pipeline=$2 n=${3:-1} eal cores
  eal=$(eal_for "$scenario" "$n")
  if [ "$n" = 1 ]; then cores=1; else cores=$(seq -s, 0 $((n - 1))); fi
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
    echo "count = $n"
    echo "cores = [$cores]"
    echo '[[ports]]'
    echo 'id = 0'
    echo '[[ports]]'
    echo 'id = 1'
    replay_pipeline "$pipeline"
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

# Every round's share, for the summary: scenario, pipeline, cores, percent.
SHARES="$OUT/shares.tsv"
: >"$SHARES"
record_share() {
  awk -v s="$1" -v p="$2" -v n="$3" -v a="$4" -v b="$5" \
    'BEGIN {if (b > 0) printf "%s\t%s\t%s\t%.2f\n", s, p, n, 100 * a / b}' >>"$SHARES"
}

# The goal of a pipeline's share of testpmd io, in percent (none: empty).
goal_of() {
  case $1 in
    port-forward) echo 85 ;;
    fair-transit) echo 70 ;;
    sibra-transit) echo 60 ;;
    zlane-border) echo 50 ;;
  esac
}

# The summary over the rounds (see the header).
summarize() {
  local key s p n goal
  [ "$ROUNDS" -ge 2 ] || return 0
  echo "summary over $ROUNDS rounds (router share of testpmd io):"
  for key in $(cut -f1-3 "$SHARES" | tr '\t' ':' | awk '!seen[$0]++'); do
    IFS=: read -r s p n <<<"$key"
    goal=$(goal_of "$p")
    awk -F'\t' -v s="$s" -v p="$p" -v n="$n" -v goal="$goal" '
      $1 == s && $2 == p && $3 == n {v[++k] = $4; if (goal != "" && $4 >= goal) up++}
      function at(q,   i, f) {i = 1 + q * (k - 1); f = int(i); return v[f] + (i - f) * (v[f + 1 > k ? k : f + 1] - v[f])}
      END {
        for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) {t = v[j]; v[j] = v[j - 1]; v[j - 1] = t}
        line = sprintf("  %-6s %-16s %s core(s): median %.1f %%, quartiles %.1f-%.1f %%, range %.1f-%.1f %%",
          s, p, n, at(0.5), at(0.25), at(0.75), v[1], v[k])
        if (goal != "") {
          # P(X >= up) for X ~ Binomial(k, 1/2).
          pv = 0
          for (x = up + 0; x <= k; x++) {
            lc = 0
            for (y = 1; y <= x; y++) lc += log(k - x + y) - log(y)
            pv += exp(lc - k * log(2))
          }
          line = line sprintf("; goal %d %%: %d of %d rounds at or above it (sign test p = %.3g)", goal, up, k, pv)
        }
        print line
      }' "$SHARES"
  done
}

gbps() { awk -v m="$1" -v b="$2" 'BEGIN {printf "%.2f", m * b * 8 / 1000}'; }

for round in $(seq "$ROUNDS"); do
  for scenario in $SCENARIOS; do
    if [ "$scenario" = sizes ]; then
      echo "round $round  sizes (Mpps / Gbit/s of frames incl. FCS; router in % of testpmd; fair in % of base):"
      printf '  %-5s %-7s %-17s %-24s %-30s\n' size ports "testpmd io" "router base" "router fair-transit"
      for size in $SIZES; do
        for ports in 1 2; do
          sc=fair-$size
          [ "$ports" = 2 ] && sc=fair-$size-2p
          t=$(testpmd_mpps "$sc")
          b=$(router_mpps "$sc" fair-base)
          f=$(router_mpps "$sc" fair-transit)
          printf '  %-5s %-7s %-17s %-24s %-30s\n' "$size" "$ports" \
            "$t / $(gbps "$t" "$size")" \
            "$b / $(gbps "$b" "$size") ($(ratio "$b" "$t"))" \
            "$f / $(gbps "$f" "$size") ($(ratio "$f" "$b"))"
        done
      done
      continue
    fi
    case $scenario in
      null) pipelines="port-forward nop" ;;
      fair) pipelines="fair-transit" ;;
      sibra) pipelines="sibra-transit" ;;
      zlane) pipelines="zlane-border" ;;
      fp) pipelines="flowpolice-edge" ;;
      scion) pipelines="scion-forward scion-border" ;;
      *)
        echo "bench-dpdk: unknown scenario $scenario (null, fair, sibra, zlane, fp, scion, sizes)" >&2
        exit 2
        ;;
    esac
    first=""
    for n in $WORKERS; do
      base=$(testpmd_mpps "$scenario" "$n")
      line="round $round  $scenario, $n core(s): testpmd io $base Mpps"
      for p in $pipelines; do
        r=$(router_mpps "$scenario" "$p" "$n")
        line="$line | router $p $r Mpps ($(ratio "$r" "$base"))"
        record_share "$scenario" "$p" "$n" "$r" "$base"
        if [ -z "$first" ]; then
          eval "first_$(echo "$p" | tr - _)=$r"
        else
          f=$(eval echo "\$first_$(echo "$p" | tr - _)")
          line="$line x$(awk -v a="$r" -v b="$f" 'BEGIN {printf "%.2f", a / b}')"
        fi
      done
      if [ -z "$first" ]; then first=$base; else
        line="$line | testpmd x$(awk -v a="$base" -v b="$first" 'BEGIN {printf "%.2f", a / b}')"
      fi
      echo "$line"
    done
  done
done
summarize
