//! Declares the `loom` cfg (P-8 model checking of the sequence counter, see `src/sync.rs`).
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
