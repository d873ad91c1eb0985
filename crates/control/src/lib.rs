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
//! Two mechanisms, both applied by every worker between two bursts through
//! its command queue (`runtime::Command`), so no lock is ever taken on the
//! packet path:
//!
//! * **Rebuild** (generic stage/egress parameters, Z-Lane rates, bounds and
//!   gateway host rates): the edited parameter table is given to the stage's
//!   (or egress discipline's) registry constructor once per worker on the
//!   control thread, so every error the router would report at start-up
//!   (key path and reason) comes back as `INVALID_ARGUMENT` before any
//!   worker is touched. The fresh instances are swapped in between two
//!   bursts; the old ones travel back and are dropped on the control thread.
//!   Pipeline counters survive a swap (they live in the pipeline); the
//!   stage's soft state (token-bucket fill, replay filter) starts afresh, as
//!   after a configuration reload on a hardware router.
//! * **In place** (SIBRA admission/revocation/link split, FlowPolice
//!   parameters, FAIR keys and channel policies, DRKey secret values): the
//!   runtime wraps protocol stages in `runtime::live::Live`, whose
//!   `Stage::as_any_mut` exposes the concrete stage; a closure sent with
//!   `Command::ApplyNow` downcasts it and calls the protocol crate's own
//!   setter, keeping tables, windows and reservations. Reads (reservation
//!   lists, flow-table statistics, key and epoch lists) run the same way on
//!   live worker state and are merged over workers (union for per-worker
//!   shards, sums for statistics). A change that the protocol crate refuses
//!   (e.g. a FlowPolice `beta` out of range, a FAIR epoch that does not
//!   follow the newest) answers `INVALID_ARGUMENT` with the crate's reason.
//!
//! Changes are serialized (one at a time), count one configuration
//! generation each, and either reach every worker or report
//! `UNAVAILABLE`/`DEADLINE_EXCEEDED`; a protocol RPC whose stage is not in
//! the pipeline answers `FAILED_PRECONDITION` ("stage `x` not in this
//! pipeline").
//!
//! # FAIR protests
//! With `[control.fair]` (see [`protest`]) and a `fair-transit` stage, the
//! router verifies protests as a cooperating transit AS on the control
//! plane's blocking pool (never on a worker), with the data keys its live
//! stages mark with, rate-limited per complainant (`RESOURCE_EXHAUSTED`
//! beyond the limit); signed verdicts are kept newest first for
//! `ListVerdicts`.
//!
//! # Counters
//! `GetCounters` carries, besides per-stage/per-port counters, each stage's
//! and egress discipline's *named* counters (`runtime::stats::Named`): e.g.
//! the Z-Lane classifier's per-class counts `class_r`..`class_u` and
//! `over_bucket`, the Z-Lane scheduler's per-queue `queue_g_sent`,
//! `queue_a_queue_full`..., FlowPolice's `table_entries`, SIBRA's
//! `steady_reservations`. The effect of a Z-Lane AS rate change shows as the
//! AS's traffic moving from `class_g` to `class_a`.
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
pub mod protest;
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
