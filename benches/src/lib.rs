//! Shared fixtures for the criterion benchmarks in `benches/benches/`.
//!
//! Run them with `cargo bench -p benches`; results are summarised in
//! `BENCHMARKS.md` at the workspace root.
