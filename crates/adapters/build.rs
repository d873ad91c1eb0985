//! Compiles each adapter's `src/<protocol>/*.proto` (package
//! `ddos.control.v1`, importing `router.proto` of the `control` crate for the
//! shared `ApplyReply`) without a system `protoc`: `protox` parses them in
//! pure Rust and `tonic-prost-build` generates messages, clients and servers.
//! Types of `router.proto` map to `control::pb`; the encoded descriptor set
//! of the adapters' own files is written for gRPC reflection.
//!
//! Only with feature `control` (the gRPC services): without it there is
//! nothing to generate, and the build needs neither protox nor prost.

#[cfg(feature = "control")]
use std::path::PathBuf;

#[cfg(not(feature = "control"))]
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}

/// The proto files, by feature (a protocol left out of the build has no service).
#[cfg(feature = "control")]
const PROTOS: &[(&str, &str)] = &[
    ("CARGO_FEATURE_ZLANE", "src/zlane/zlane.proto"),
    ("CARGO_FEATURE_ZLANE", "src/zlane/drkey.proto"),
    ("CARGO_FEATURE_SIBRA", "src/sibra/sibra.proto"),
    ("CARGO_FEATURE_FLOWPOLICE", "src/flowpolice/flowpolice.proto"),
    ("CARGO_FEATURE_FAIR", "src/fair/fair.proto"),
];

/// Messages of `router.proto` that the adapters' files use.
#[cfg(feature = "control")]
const SHARED: &[&str] = &["ApplyReply"];

#[cfg(feature = "control")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<&str> =
        PROTOS.iter().filter(|(f, _)| std::env::var_os(f).is_some()).map(|(_, p)| *p).collect();
    let mut includes: Vec<String> =
        files.iter().filter_map(|f| f.rsplit_once('/').map(|(d, _)| d.to_string())).collect();
    includes.push("../control/proto".into());
    includes.dedup();
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut fds = protox::compile(&files, &includes)?;
    // Keep only this crate's files: `router.proto` is generated (and served
    // for reflection) by the control crate.
    fds.file.retain(|f| f.name() != "router.proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("adapters_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    let mut b = tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .type_attribute(".", "#[derive(serde::Serialize)]")
        // Read back from a stage's live parameters (`FlowPoliceControl.GetParams`).
        .type_attribute(".ddos.control.v1.FlowPoliceParams", "#[derive(serde::Deserialize)]");
    for m in SHARED {
        b = b.extern_path(format!(".ddos.control.v1.{m}"), format!("::control::pb::{m}"));
    }
    b.compile_fds(fds)?;
    // A build whose protocols have no service (e.g. only `scion`) still
    // includes the module, empty.
    let generated = out.join("ddos.control.v1.rs");
    if !generated.exists() {
        std::fs::write(generated, "")?;
    }
    Ok(())
}
