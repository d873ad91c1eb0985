//! Control-plane errors and their gRPC status codes.

use tonic::{Code, Status};

/// Why a control request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtlError {
    /// The request is malformed or names something invalid.
    #[error("{0}")]
    InvalidArgument(String),
    /// The router is not in a state (or configuration) that allows the request.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The request names something that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The feature is not available in this build.
    #[error("{0}")]
    Unimplemented(String),
    /// The workers did not take the change (queue full, router stopping).
    #[error("{0}")]
    Unavailable(String),
    /// The workers did not confirm the change in time.
    #[error("{0}")]
    DeadlineExceeded(String),
    /// A rate limit refused the request (e.g. too many FAIR protests).
    #[error("{0}")]
    ResourceExhausted(String),
    /// The router's state is not what the control plane expected (a bug).
    #[error("{0}")]
    Internal(String),
}

impl CtlError {
    /// `INVALID_ARGUMENT` with a formatted message.
    pub fn invalid(msg: impl Into<String>) -> Self {
        CtlError::InvalidArgument(msg.into())
    }

    /// `FAILED_PRECONDITION`: a stage kind is not in the pipeline.
    pub fn no_stage(kinds: &[&str]) -> Self {
        let names: Vec<String> = kinds.iter().map(|k| format!("`{k}`")).collect();
        CtlError::FailedPrecondition(format!("stage {} not in this pipeline", names.join(" or ")))
    }

    /// The gRPC status code.
    pub fn code(&self) -> Code {
        match self {
            CtlError::InvalidArgument(_) => Code::InvalidArgument,
            CtlError::FailedPrecondition(_) => Code::FailedPrecondition,
            CtlError::NotFound(_) => Code::NotFound,
            CtlError::Unimplemented(_) => Code::Unimplemented,
            CtlError::Unavailable(_) => Code::Unavailable,
            CtlError::DeadlineExceeded(_) => Code::DeadlineExceeded,
            CtlError::ResourceExhausted(_) => Code::ResourceExhausted,
            CtlError::Internal(_) => Code::Internal,
        }
    }
}

impl From<CtlError> for Status {
    fn from(e: CtlError) -> Status {
        Status::new(e.code(), e.to_string())
    }
}
