#!/usr/bin/env bash
# The project's full test command (README "Test"). Runs on a fresh Debian machine:
# installs what it needs (DPDK's dev packages), then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
# A one-shot build gains nothing from incremental caches, which would double the disk used.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Unit, property, integration and doc tests of every crate.
cargo test --workspace --locked

# Benchmarks run once each in test mode so they cannot rot.
cargo test --workspace --locked --benches

# DPDK end to end: net_null smoke, net_pcap replay checked packet by packet,
# net_af_packet on a veth pair in a test-made network namespace (--no-huge --no-pci).
bash scripts/test-dpdk.sh

# Wireshark plugin: every trafgen profile and crafted packets decoded with tshark, fields checked.
bash scripts/test-wireshark.sh

# /metrics of every example pipeline through promtool; the Grafana dashboard's queries on Prometheus.
bash scripts/test-metrics.sh

# Every cargo-fuzz target builds on stable and survives a bounded random run.
bash scripts/fuzz-smoke.sh
