#!/usr/bin/env bash
# DPDK end-to-end tests of the runtime (net_null smoke, net_pcap replay, and
# net_af_packet on a veth pair in a test-made netns, skipped when not root).
# Installs DPDK's development packages if missing (Debian), then runs the
# tests behind the runtime's `dpdk` feature. Needs no hugepages, NIC or root
# beyond the apt install (EAL runs with --no-huge --no-pci --in-memory).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! pkg-config --exists libdpdk 2>/dev/null || ! command -v clang >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "test-dpdk: libdpdk-dev/clang missing and not root; skipping DPDK tests" >&2
        exit 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq libdpdk-dev dpdk pkg-config libclang-dev clang >/dev/null
fi

cargo test -p runtime --features dpdk --lib --test dpdk --test dpdk_af_packet -- --test-threads=1 --nocapture
# The DPDK router managed live by `ctl` (the test runs both binaries).
cargo build -p ctl
cargo test -p router --features dpdk --test dpdk_live -- --nocapture
