//! Compiles `proto/*.proto` without a system `protoc`: `protox` parses the
//! files into a descriptor set in pure Rust, `tonic-prost-build` generates
//! messages, clients and servers from it, and the encoded descriptor set is
//! written next to them for gRPC reflection.

use std::path::PathBuf;

const PROTOS: &[&str] = &["router.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<String> = PROTOS.iter().map(|p| format!("proto/{p}")).collect();
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(&files, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("control_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .type_attribute(".", "#[derive(serde::Serialize)]")
        // `"kind": "gauge"` in `ctl --json`, not the enum's number.
        .field_attribute(
            ".ddos.control.v1.NamedCounter.kind",
            "#[serde(serialize_with = \"crate::pb::serialize_named_kind\")]",
        )
        .compile_fds(fds)?;
    Ok(())
}
