#!/usr/bin/env bash
# Captures and router pipelines of the DPDK replay benchmarks, shared by
# scripts/bench-dpdk.sh (wall clock against testpmd) and scripts/instr-report
# (instructions per packet).
#
#   scripts/lib/replay.sh captures ROUTER OUTDIR   write OUTDIR/{fair,sibra,zlane,scion,fp,empty}.pcap
#   scripts/lib/replay.sh pipeline NAME             print pipeline NAME's [[pipeline]] TOML
#
# or `source` it for the functions and REPLAY_UNIX. Every capture is made by
# `router gen` at REPLAY_UNIX, the synthetic backend's virtual epoch: a router
# that replays one pins its Unix clock there (`[io.dpdk] unix_time_s`) so the
# looped packets' timestamps stay fresh.

REPLAY_UNIX=1767225600

# replay_captures ROUTER OUTDIR
replay_captures() {
  local router=$1 out=$2
  "$router" gen config/fair-transit.toml --group fair --flows 2048 --out "$out/fair.pcap"
  "$router" gen config/sibra-transit.toml --group reserved --flows 2048 --out "$out/sibra.pcap"
  "$router" gen config/zlane-border.toml --group guaranteed-as --flows 2048 --out "$out/zlane.pcap"
  "$router" gen config/scion-border.toml --group plain-scion --flows 2048 --out "$out/scion.pcap"
  # FlowPolice: one request per flow, then eight regular packets per flow
  # carrying the capability the router stamps on that request: the stage's
  # clock at the request in ms mod 2^32, here the pinned Unix clock (the
  # pipeline runs on `clock = "unix"`). 512 flows: 4608 frames, which
  # net_pcap holds in mbufs to loop them.
  "$router" gen config/flowpolice-edge.toml --group requests --flows 512 --out "$out/fp-req.pcap"
  "$router" gen config/flowpolice-edge.toml --group regular --flows 512 \
    --param "cap_ts_ms=$((REPLAY_UNIX * 1000 % 4294967296))" --out "$out/fp-reg.pcap"
  {
    cat "$out/fp-req.pcap"
    for _ in 1 2 3 4 5 6 7 8; do tail -c +25 "$out/fp-reg.pcap"; done
  } >"$out/fp.pcap"
  # A capture with no packets: a port that receives nothing.
  printf '\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x01\x00\x00\x00' >"$out/empty.pcap"
}

# replay_pipeline NAME: nop, port-forward, fair-base, fair-transit,
# sibra-transit, zlane-border, flowpolice-edge, scion-forward, scion-border.
replay_pipeline() {
  case $1 in
    nop | port-forward)
      [ "$1" = nop ] && printf '[[pipeline]]\nkind = "nop"\n'
      printf '[[pipeline]]\nkind = "port-forward"\nmap = [[0, 1], [1, 0]]\n'
      ;;
    fair-transit | fair-base)
      printf '[[pipeline]]\nkind = "parse"\n'
      printf '[[pipeline]]\nkind = "ipv4-forward"\n'
      printf 'routes = [{ prefix = "10.2.0.0/16", port = 1 }, { prefix = "10.1.0.0/16", port = 0 }]\n'
      if [ "$1" = fair-transit ]; then
        printf '[[pipeline]]\nkind = "fair-transit"\ndata_key = "000102030405060708090a0b0c0d0e0f"\n'
        printf 'keys_from = 1_767_225_600\nkeys_until = 1_767_312_000\n'
      fi
      ;;
    sibra-transit)
      printf '[[pipeline]]\nkind = "parse"\n'
      printf '[[pipeline]]\nkind = "sibra-transit"\nkey = "2b7e151628aed2a6abf7158809cf4f3c"\n'
      printf 'interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]\n'
      ;;
    flowpolice-edge)
      printf '[[pipeline]]\nkind = "parse"\n'
      printf '[[pipeline]]\nkind = "ipv4-forward"\n'
      printf 'routes = [{ prefix = "10.2.0.0/16", port = 1 }, { prefix = "10.1.0.0/16", port = 0 }]\n'
      printf '[[pipeline]]\nkind = "flowpolice"\ncapability_key = "c0ffee00c0ffee00c0ffee00c0ffee00"\n'
      printf 'table_key = "0123456789abcdef0123456789abcdef"\nclock = "unix"\npuzzle = { min_level = 4 }\n'
      printf 'seeds = { root = "5eed000000000000000000000000000000000000000000000000000000000001", first_epoch = 29_453_760, epochs = 1440 }\n'
      ;;
    scion-forward)
      printf '[[pipeline]]\nkind = "parse"\n'
      printf '[[pipeline]]\nkind = "scion-forward"\nkey = "000102030405060708090a0b0c0d0e0f"\n'
      printf 'interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]\n'
      ;;
    scion-border)
      # The example's own pipeline.
      sed -n '/^\[\[pipeline\]\]/,$p' config/scion-border.toml | sed '/^\[run\]/,$d'
      ;;
    zlane-border)
      printf '[[pipeline]]\nkind = "parse"\n'
      printf '[[pipeline]]\nkind = "zlane-classify"\nlocal_ia = "1-ff00:0:110"\n'
      printf 'sv = "f0e0d0c0b0a090807060504030201000"\nepoch = [1_700_000_000, 1_900_000_000]\n'
      printf 'capacity_bps = 100_000_000_000\nmu_g = 0.5\n'
      printf 'rates = [{ as = "1-ff00:0:111", bps = 6_000_000_000 }]\n'
      printf '[[pipeline]]\nkind = "scion-forward"\nkey = "000102030405060708090a0b0c0d0e0f"\n'
      printf 'interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]\n'
      ;;
    *)
      echo "replay: unknown pipeline $1" >&2
      return 2
      ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/../.."
  case ${1:-} in
    captures) replay_captures "$2" "$3" ;;
    pipeline) replay_pipeline "$2" ;;
    *)
      echo "usage: scripts/lib/replay.sh captures ROUTER OUTDIR | pipeline NAME" >&2
      exit 2
      ;;
  esac
fi
