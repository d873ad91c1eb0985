//! The router's control API: a tonic gRPC server, its client, bearer-token
//! authentication, live reconfiguration, and a Prometheus text endpoint.
//!
//! # Embedding (what `router run` does)
//! ```ignore
//! let cfg = runtime::config::load_file(path)?;
//! let control_cfg = control::ControlConfig::from_toml(control_table)?;   // `[control]`
//! let router = runtime::start(cfg.clone())?;
//! let plane = control::Plane::with_timeout(router, cfg, control_cfg.apply_timeout());
//! let server = control::serve(plane.clone(), &control_cfg)?; // own thread + tokio runtime
//! // ... poll plane.is_finished() or wait for a signal (plane.stop_flag()) ...
//! plane.stop();
//! server.shutdown();                                    // joins the control thread
//! let router = std::sync::Arc::try_unwrap(plane).ok().unwrap().into_router();
//! let summary = router.wait()?;
//! ```
//!
//! # Services
//! `ddos.control.v1.{RouterControl, ZlaneControl, SibraControl,
//! FlowPoliceControl, FairControl, DrkeyControl}` (see `proto/`), plus
//! `grpc.health.v1.Health` (unauthenticated, so that probes work) and
//! `grpc.reflection.v1.ServerReflection` (authenticated, switchable).
//!
//! # Authentication
//! Every call to the `ddos.control.v1` services and to reflection must carry
//! `authorization: Bearer <token>`, the token being the trimmed content of
//! `control.token_file`; the comparison is constant-time. Missing or wrong
//! tokens get `UNAUTHENTICATED`. Without a token file the server refuses to
//! start unless `allow_unauthenticated = true` and it listens on loopback.
//!
//! # Live reconfiguration
//! A change is validated as a whole on the control thread: the edited
//! parameter table is given to the stage's (or egress discipline's) registry
//! constructor once per worker, so every error the router would report at
//! start-up (key path and reason) comes back as `INVALID_ARGUMENT` before any
//! worker is touched. The fresh instances are then sent through each
//! worker's command queue and swapped in between two bursts; the old
//! instances travel back and are dropped on the control thread, off the data
//! path. Pipeline counters survive a swap (they live in the pipeline); the
//! stage's soft state (token-bucket fill, replay filter) starts afresh, as it
//! does after a configuration reload on a hardware router. Packets queued in
//! a replaced egress discipline are moved into the new one.
//!
//! Changes are serialized (one at a time) and either reach every worker or
//! report `UNAVAILABLE`/`DEADLINE_EXCEEDED`; a protocol RPC whose stage is not
//! in the pipeline answers `FAILED_PRECONDITION` ("stage `x` not in this
//! pipeline"), and one whose stage cannot yet be changed live answers
//! `UNIMPLEMENTED` — after validating its input, never pretending success.
//!
//! # Metrics
//! `GET /metrics` on `control.metrics_listen` (plain HTTP/1.1, loopback by
//! default) serves the same counters in the Prometheus text format.

pub mod auth;
pub mod client;
pub mod config;
pub mod error;
pub mod metrics;
pub mod plane;
pub mod server;
mod services;
pub mod text;

/// Messages, clients and servers generated from `proto/*.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("ddos.control.v1");

    /// The encoded descriptor set of all control protos (for reflection).
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/control_descriptor.bin"));
}

pub use config::ControlConfig;
pub use error::CtlError;
pub use plane::Plane;
pub use server::{serve, ServeError, ServerHandle};
