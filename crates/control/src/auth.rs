//! Bearer-token authentication (a tonic interceptor, constant-time compare).

use std::path::Path;
use std::sync::Arc;

use subtle::ConstantTimeEq;
use tonic::{Request, Status};

/// Longest accepted token; comparison runs over this many bytes regardless
/// of the presented token's length, so timing reveals nothing but the outcome.
pub const MAX_TOKEN: usize = 256;
/// Shortest accepted token (128 bits of hex or base64 material).
pub const MIN_TOKEN: usize = 16;

/// The expected token, or no authentication at all.
#[derive(Clone)]
pub struct Auth {
    token: Option<Arc<[u8; MAX_TOKEN]>>,
    len: usize,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Auth").field("enabled", &self.token.is_some()).finish()
    }
}

/// A token file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("control.token_file `{file}`: {reason}")]
pub struct TokenError {
    /// The file.
    pub file: String,
    /// Why.
    pub reason: String,
}

impl Auth {
    /// No authentication (loopback lab setups only; see [`crate::ControlConfig`]).
    pub fn disabled() -> Self {
        Auth { token: None, len: 0 }
    }

    /// Requires `token` (trimmed of surrounding whitespace).
    pub fn with_token(token: &[u8]) -> Result<Self, String> {
        let t = token.trim_ascii();
        if t.len() < MIN_TOKEN || t.len() > MAX_TOKEN {
            return Err(format!("token must be {MIN_TOKEN}..={MAX_TOKEN} bytes, is {}", t.len()));
        }
        if !t.iter().all(|b| b.is_ascii_graphic()) {
            return Err("token must be printable ASCII without spaces".into());
        }
        let mut buf = [0u8; MAX_TOKEN];
        buf[..t.len()].copy_from_slice(t);
        Ok(Auth { token: Some(Arc::new(buf)), len: t.len() })
    }

    /// Reads the token from `path`.
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let err = |reason: String| TokenError { file: path.display().to_string(), reason };
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        Auth::with_token(&bytes).map_err(err)
    }

    /// Whether `presented` is the expected token (constant time in its content).
    pub fn check(&self, presented: &[u8]) -> bool {
        let Some(expect) = &self.token else { return true };
        let mut buf = [0u8; MAX_TOKEN];
        let n = presented.len().min(MAX_TOKEN);
        buf[..n].copy_from_slice(&presented[..n]);
        let same_len = (presented.len() as u64).ct_eq(&(self.len as u64));
        let same_bytes = buf.ct_eq(&expect[..]);
        bool::from(same_len & same_bytes)
    }

    /// The interceptor: `authorization: Bearer <token>` or `UNAUTHENTICATED`.
    #[allow(clippy::result_large_err)]
    pub fn intercept(&self, req: Request<()>) -> Result<Request<()>, Status> {
        if self.token.is_none() {
            return Ok(req);
        }
        let Some(v) = req.metadata().get("authorization") else {
            return Err(Status::unauthenticated(
                "missing `authorization: Bearer <token>` metadata",
            ));
        };
        let presented = v.as_bytes().strip_prefix(b"Bearer ").unwrap_or(b"");
        if self.check(presented) {
            Ok(req)
        } else {
            Err(Status::unauthenticated("invalid bearer token"))
        }
    }
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        self.intercept(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_exact_token() {
        let a = Auth::with_token(b"  0123456789abcdef0123\n").unwrap();
        assert!(a.check(b"0123456789abcdef0123"));
        assert!(!a.check(b"0123456789abcdef012"));
        assert!(!a.check(b"0123456789abcdef01234"));
        assert!(!a.check(b"0123456789abcdef0124"));
        assert!(!a.check(b""));
        assert!(!a.check(&[b'0'; 1000]));
    }

    #[test]
    fn rejects_weak_tokens() {
        assert!(Auth::with_token(b"short").is_err());
        assert!(Auth::with_token(b"0123456789 abcdef").is_err());
        assert!(Auth::with_token(&[b'a'; 257]).is_err());
    }

    #[test]
    fn interceptor_maps_to_unauthenticated() {
        let a = Auth::with_token(b"0123456789abcdef").unwrap();
        let mut r = Request::new(());
        assert_eq!(a.intercept(r).unwrap_err().code(), tonic::Code::Unauthenticated);
        r = Request::new(());
        r.metadata_mut().insert("authorization", "Bearer 0123456789abcdeX".parse().unwrap());
        assert_eq!(a.intercept(r).unwrap_err().code(), tonic::Code::Unauthenticated);
        r = Request::new(());
        r.metadata_mut().insert("authorization", "Bearer 0123456789abcdef".parse().unwrap());
        assert!(a.intercept(r).is_ok());
        assert!(Auth::disabled().intercept(Request::new(())).is_ok());
    }
}
