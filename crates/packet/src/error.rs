//! The one error type every parser in this crate returns.

/// Why a buffer was rejected.
///
/// Every parser returns one of these instead of panicking; the pipeline maps
/// them onto drop reasons and counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The buffer ends before the header (or a length it announces) does.
    #[error("truncated packet")]
    Truncated,
    /// A field holds a value the format forbids; `what` names the field.
    #[error("malformed packet: {what}")]
    Malformed {
        /// The offending field or rule.
        what: &'static str,
    },
    /// The packet is well formed but uses a feature this crate does not handle.
    #[error("unsupported: {what}")]
    Unsupported {
        /// The feature that is not handled.
        what: &'static str,
    },
    /// A checksum does not verify.
    #[error("bad checksum")]
    Checksum,
    /// An emit target buffer is too small for the representation.
    #[error("buffer too small to emit")]
    BufferTooSmall,
}

impl Error {
    /// Shorthand for [`Error::Malformed`].
    pub const fn malformed(what: &'static str) -> Self {
        Error::Malformed { what }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub const fn unsupported(what: &'static str) -> Self {
        Error::Unsupported { what }
    }
}

/// Result alias used by every parser.
pub type Result<T> = core::result::Result<T, Error>;
