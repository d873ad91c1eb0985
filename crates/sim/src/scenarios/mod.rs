//! The papers' scenarios, each with a serde parameter struct (every field
//! is read from the scenario's TOML file) and a runner returning a
//! [`Report`](crate::report::Report).

pub mod fair;
pub mod flowpolice;
pub mod flowpolice_fct;
mod fp_client;
mod fp_world;
pub mod sibra;
pub mod zlane;
pub mod zworld;

/// `x > 0` (false for NaN): parameter checks.
pub(crate) fn positive(x: f64) -> bool {
    x > 0.0
}

/// Options that do not change results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOpts {
    /// Print progress to stderr.
    pub progress: bool,
}

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A parameter is out of range or inconsistent.
    #[error("invalid parameter: {0}")]
    Param(String),
    /// A protocol crate rejected the derived configuration.
    #[error("configuration rejected by zlane: {0}")]
    Zlane(#[from] ::pipeline::Invalid),
}
