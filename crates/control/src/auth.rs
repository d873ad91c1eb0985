//! Who is calling, and with which role: bearer tokens (admin and
//! read-only, compared in constant time, re-read when their files change)
//! and client-certificate subjects (`[[control.clients]]`).
//!
//! The server's access layer ([`crate::access`]) authenticates every call
//! once and hands the [`Caller`] to the services in the request's
//! extensions; [`Auth`] is also a tonic interceptor, which accepts a request
//! the access layer let through and otherwise asks for the admin token.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use subtle::ConstantTimeEq;
use tonic::{Request, Status};

use crate::config::{ControlConfig, Role};
use crate::subject::{Subject, SubjectPattern};

/// Longest accepted token; comparison runs over this many bytes regardless
/// of the presented token's length, so timing reveals nothing but the outcome.
pub const MAX_TOKEN: usize = 256;
/// Shortest accepted token (128 bits of hex or base64 material).
pub const MIN_TOKEN: usize = 16;
/// How often a token file's metadata is looked at, at most.
pub const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// A token, padded to [`MAX_TOKEN`] bytes.
#[derive(Clone)]
struct Token {
    bytes: Box<[u8; MAX_TOKEN]>,
    len: usize,
}

impl Token {
    fn new(token: &[u8]) -> Result<Token, String> {
        let t = token.trim_ascii();
        if t.len() < MIN_TOKEN || t.len() > MAX_TOKEN {
            return Err(format!("token must be {MIN_TOKEN}..={MAX_TOKEN} bytes, is {}", t.len()));
        }
        if !t.iter().all(|b| b.is_ascii_graphic()) {
            return Err("token must be printable ASCII without spaces".into());
        }
        let mut bytes = Box::new([0u8; MAX_TOKEN]);
        bytes[..t.len()].copy_from_slice(t);
        Ok(Token { bytes, len: t.len() })
    }

    /// Constant time in the content of both.
    fn matches(&self, presented: &[u8]) -> bool {
        let mut buf = [0u8; MAX_TOKEN];
        let n = presented.len().min(MAX_TOKEN);
        buf[..n].copy_from_slice(&presented[..n]);
        let same_len = (presented.len() as u64).ct_eq(&(self.len as u64));
        let same_bytes = buf.ct_eq(&self.bytes[..]);
        bool::from(same_len & same_bytes)
    }

    fn same(&self, other: &Token) -> bool {
        self.matches(&other.bytes[..other.len])
    }
}

/// What identifies a token file's content without reading it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    let m = std::fs::metadata(path)?;
    Ok(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(&m),
    })
}

/// A token file and what it held when last read.
struct TokenFile {
    path: PathBuf,
    key: &'static str,
    state: Mutex<FileState>,
}

struct FileState {
    /// `None` while the file cannot be used: its role is refused (fail closed).
    token: Option<Token>,
    stamp: Option<Stamp>,
    checked: Instant,
    error: Option<String>,
}

impl TokenFile {
    fn open(path: &Path, key: &'static str) -> Result<TokenFile, TokenError> {
        let err = |reason: String| TokenError { key, file: path.display().to_string(), reason };
        let st = stamp(path).map_err(|e| err(e.to_string()))?;
        let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        let token = Token::new(&bytes).map_err(err)?;
        Ok(TokenFile {
            path: path.to_path_buf(),
            key,
            state: Mutex::new(FileState {
                token: Some(token),
                stamp: Some(st),
                checked: Instant::now(),
                error: None,
            }),
        })
    }

    /// The current token, re-read if the file changed (looked at no more
    /// than once per [`RELOAD_CHECK`]).
    fn current(&self) -> Option<Token> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.checked.elapsed() >= RELOAD_CHECK {
            st.checked = Instant::now();
            self.refresh(&mut st);
        }
        st.token.clone()
    }

    fn refresh(&self, st: &mut FileState) {
        let now = stamp(&self.path);
        if let Ok(s) = &now {
            if Some(*s) == st.stamp && st.error.is_none() {
                return;
            }
        }
        let read = now.map_err(|e| e.to_string()).and_then(|s| {
            let bytes = std::fs::read(&self.path).map_err(|e| e.to_string())?;
            Token::new(&bytes).map(|t| (s, t))
        });
        match read {
            Ok((s, t)) => {
                let changed = st.token.as_ref().is_none_or(|old| !old.same(&t));
                st.token = Some(t);
                st.stamp = Some(s);
                if changed || st.error.is_some() {
                    eprintln!("control: {} `{}` (re)loaded", self.key, self.path.display());
                }
                st.error = None;
            }
            Err(e) => {
                // Fail closed: a token file that cannot be used accepts nothing.
                if st.error.as_deref() != Some(&e) {
                    eprintln!(
                        "control: {} `{}`: {e}; refusing its role until it is fixed",
                        self.key,
                        self.path.display()
                    );
                }
                st.token = None;
                st.stamp = None;
                st.error = Some(e);
            }
        }
    }
}

/// Where the tokens come from: files (re-read on change) or fixed values.
enum Source {
    File(TokenFile),
    Fixed(Token),
}

impl Source {
    fn current(&self) -> Option<Token> {
        match self {
            Source::File(f) => f.current(),
            Source::Fixed(t) => Some(t.clone()),
        }
    }
}

struct Inner {
    admin: Option<Source>,
    read: Option<Source>,
    clients: Vec<(SubjectPattern, Role)>,
}

/// The credentials a server accepts, or none at all (every caller admin).
#[derive(Clone)]
pub struct Auth {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a token.
        let mut d = f.debug_struct("Auth");
        d.field("enabled", &self.inner.is_some());
        if let Some(i) = &self.inner {
            d.field("admin_token", &i.admin.is_some())
                .field("read_token", &i.read.is_some())
                .field("clients", &i.clients.len());
        }
        d.finish()
    }
}

/// A token file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("control.{key} `{file}`: {reason}")]
pub struct TokenError {
    /// `token_file` or `read_token_file`.
    pub key: &'static str,
    /// The file.
    pub file: String,
    /// Why.
    pub reason: String,
}

/// How a caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Credential {
    /// The admin bearer token.
    AdminToken,
    /// The read-only bearer token.
    ReadToken,
    /// A client certificate listed in `[[control.clients]]`.
    Certificate,
    /// Nothing: the server runs without authentication.
    Open,
}

impl Credential {
    /// `admin-token`, `read-token`, `certificate`, `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            Credential::AdminToken => "admin-token",
            Credential::ReadToken => "read-token",
            Credential::Certificate => "certificate",
            Credential::Open => "open",
        }
    }
}

/// An authenticated caller (in the request's extensions for the services).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// What it may do.
    pub role: Role,
    /// The credential that gave the role.
    pub credential: Credential,
    /// Its client certificate's subject, under TLS with client certificates.
    pub subject: Option<String>,
    /// Its address.
    pub peer: Option<SocketAddr>,
}

/// Why a caller was not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No credential at all.
    Missing,
    /// A bearer token that is not one of the server's.
    InvalidToken,
}

impl Refusal {
    /// The `UNAUTHENTICATED` status.
    pub fn status(self) -> Status {
        match self {
            Refusal::Missing => {
                Status::unauthenticated("missing `authorization: Bearer <token>` metadata")
            }
            Refusal::InvalidToken => Status::unauthenticated("invalid bearer token"),
        }
    }
}

impl Auth {
    /// No authentication (loopback lab setups only; see [`crate::ControlConfig`]).
    pub fn disabled() -> Self {
        Auth { inner: None }
    }

    /// Requires `token` (trimmed of surrounding whitespace), which gives the admin role.
    pub fn with_token(token: &[u8]) -> Result<Self, String> {
        Self::with_tokens(Some(token), None)
    }

    /// Requires the admin `admin` or the read-only `read` token (either may
    /// be absent, not both; they must differ).
    pub fn with_tokens(admin: Option<&[u8]>, read: Option<&[u8]>) -> Result<Self, String> {
        let admin = admin.map(Token::new).transpose()?;
        let read = read.map(Token::new).transpose()?;
        if let (Some(a), Some(r)) = (&admin, &read) {
            if a.same(r) {
                return Err("the read-only token is the admin token".into());
            }
        }
        if admin.is_none() && read.is_none() {
            return Err("no token".into());
        }
        Ok(Auth {
            inner: Some(Arc::new(Inner {
                admin: admin.map(Source::Fixed),
                read: read.map(Source::Fixed),
                clients: Vec::new(),
            })),
        })
    }

    /// Reads the admin token from `path` (re-read when the file changes).
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let f = TokenFile::open(path, "token_file")?;
        Ok(Auth {
            inner: Some(Arc::new(Inner {
                admin: Some(Source::File(f)),
                read: None,
                clients: Vec::new(),
            })),
        })
    }

    /// The credentials `cfg` names: `token_file` (admin), `read_token_file`
    /// (read-only), `[[control.clients]]`; disabled when it names none.
    pub fn from_config(cfg: &ControlConfig) -> Result<Self, TokenError> {
        if !cfg.has_credentials() {
            return Ok(Auth::disabled());
        }
        let admin =
            cfg.token_file.as_deref().map(|p| TokenFile::open(p, "token_file")).transpose()?;
        let read = cfg
            .read_token_file
            .as_deref()
            .map(|p| TokenFile::open(p, "read_token_file"))
            .transpose()?;
        if let (Some(a), Some(r)) = (&admin, &read) {
            if let (Some(a), Some(r)) = (a.current(), r.current()) {
                if a.same(&r) {
                    return Err(TokenError {
                        key: "read_token_file",
                        file: r_path(cfg),
                        reason: "holds the admin token (token_file); a read-only token must differ"
                            .into(),
                    });
                }
            }
        }
        let mut clients = Vec::new();
        for (i, c) in cfg.clients.iter().enumerate() {
            let p = c.subject.parse().map_err(|reason| TokenError {
                key: "clients",
                file: format!("clients[{i}].subject"),
                reason,
            })?;
            clients.push((p, c.role));
        }
        Ok(Auth {
            inner: Some(Arc::new(Inner {
                admin: admin.map(Source::File),
                read: read.map(Source::File),
                clients,
            })),
        })
    }

    /// Whether the server asks for credentials at all.
    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The role `presented` (a bare token) gives, if any. Both tokens are
    /// always compared, in constant time.
    pub fn token_role(&self, presented: &[u8]) -> Option<Role> {
        let inner = self.inner.as_ref()?;
        let check = |s: &Option<Source>| {
            s.as_ref().and_then(Source::current).is_some_and(|t| t.matches(presented))
        };
        let admin = check(&inner.admin);
        let read = check(&inner.read);
        if admin {
            Some(Role::Admin)
        } else if read {
            Some(Role::Read)
        } else {
            None
        }
    }

    /// Whether `presented` is one of the expected tokens (constant time in
    /// its content); always, without authentication.
    pub fn check(&self, presented: &[u8]) -> bool {
        self.inner.is_none() || self.token_role(presented).is_some()
    }

    /// Whether the value of an `authorization` header (`Bearer <token>`),
    /// if any, carries one of the expected tokens (always, without authentication).
    pub fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        if self.inner.is_none() {
            return true;
        }
        let presented = authorization.and_then(|v| v.strip_prefix(b"Bearer ")).unwrap_or(b"");
        self.check(presented)
    }

    /// The role a client certificate's subject gives, if it is listed.
    pub fn subject_role(&self, subject: &Subject) -> Option<Role> {
        let inner = self.inner.as_ref()?;
        inner.clients.iter().filter(|(p, _)| subject.matches(p)).map(|(_, r)| *r).max()
    }

    /// Whether `[[control.clients]]` lists any subject.
    pub fn has_client_rules(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| !i.clients.is_empty())
    }

    /// Who is calling: the highest role its bearer token (`authorization`
    /// header value) and its client certificate give. A token that is
    /// presented but wrong is refused even if the certificate would do.
    pub fn authenticate(
        &self,
        authorization: Option<&[u8]>,
        subject: Option<&Subject>,
        peer: Option<SocketAddr>,
    ) -> Result<Caller, Refusal> {
        let subject_text = subject.map(ToString::to_string);
        if self.inner.is_none() {
            return Ok(Caller {
                role: Role::Admin,
                credential: Credential::Open,
                subject: subject_text,
                peer,
            });
        }
        let by_token = match authorization {
            Some(v) => {
                let presented = v.strip_prefix(b"Bearer ").unwrap_or(b"");
                match self.token_role(presented) {
                    Some(r) => Some(r),
                    None => return Err(Refusal::InvalidToken),
                }
            }
            None => None,
        };
        let by_cert = subject.and_then(|s| self.subject_role(s));
        let (role, credential) = match (by_token, by_cert) {
            (Some(t), Some(c)) if c > t => (c, Credential::Certificate),
            (Some(Role::Admin), _) => (Role::Admin, Credential::AdminToken),
            (Some(Role::Read), _) => (Role::Read, Credential::ReadToken),
            (None, Some(c)) => (c, Credential::Certificate),
            (None, None) => return Err(Refusal::Missing),
        };
        Ok(Caller { role, credential, subject: subject_text, peer })
    }

    /// The interceptor: a request the access layer authenticated passes
    /// (its [`Caller`] is in the extensions); any other needs the admin
    /// token, as nothing here says whether it mutates. `UNAUTHENTICATED` or
    /// `PERMISSION_DENIED` otherwise.
    #[allow(clippy::result_large_err)]
    pub fn intercept(&self, req: Request<()>) -> Result<Request<()>, Status> {
        if self.inner.is_none() || req.extensions().get::<Caller>().is_some() {
            return Ok(req);
        }
        let header = req.metadata().get("authorization").map(|v| v.as_bytes());
        match self.authenticate(header, None, None) {
            Ok(c) if c.role == Role::Admin => Ok(req),
            Ok(_) => Err(Status::permission_denied("this call needs the admin credential")),
            Err(r) => Err(r.status()),
        }
    }
}

fn r_path(cfg: &ControlConfig) -> String {
    cfg.read_token_file.as_deref().map(|p| p.display().to_string()).unwrap_or_default()
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
        assert!(Auth::with_tokens(Some(b"0123456789abcdef"), Some(b"0123456789abcdef")).is_err());
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

    #[test]
    fn interceptor_asks_for_admin_unless_the_access_layer_decided() {
        let a = Auth::with_tokens(Some(b"admin-0123456789abcdef"), Some(b"read-0123456789abcdef"))
            .unwrap();
        let mut r = Request::new(());
        r.metadata_mut().insert("authorization", "Bearer read-0123456789abcdef".parse().unwrap());
        assert_eq!(a.intercept(r).unwrap_err().code(), tonic::Code::PermissionDenied);
        let mut r = Request::new(());
        r.extensions_mut().insert(Caller {
            role: Role::Read,
            credential: Credential::ReadToken,
            subject: None,
            peer: None,
        });
        assert!(a.intercept(r).is_ok());
    }

    #[test]
    fn header_check_needs_the_bearer_prefix() {
        let a = Auth::with_token(b"0123456789abcdef").unwrap();
        assert!(a.accepts(Some(b"Bearer 0123456789abcdef")));
        assert!(!a.accepts(Some(b"0123456789abcdef")));
        assert!(!a.accepts(Some(b"Bearer ")));
        assert!(!a.accepts(None));
        assert!(Auth::disabled().accepts(None));
    }

    #[test]
    fn roles_from_tokens_and_certificates() {
        let a = Auth::with_tokens(Some(b"admin-0123456789abcdef"), Some(b"read-0123456789abcdef"))
            .unwrap();
        let auth = |h: Option<&str>| a.authenticate(h.map(str::as_bytes), None, None);
        assert_eq!(auth(Some("Bearer admin-0123456789abcdef")).unwrap().role, Role::Admin);
        let r = auth(Some("Bearer read-0123456789abcdef")).unwrap();
        assert_eq!((r.role, r.credential), (Role::Read, Credential::ReadToken));
        assert_eq!(auth(Some("Bearer nope-0123456789abcdef")), Err(Refusal::InvalidToken));
        assert_eq!(auth(Some("read-0123456789abcdef")), Err(Refusal::InvalidToken));
        assert_eq!(auth(None), Err(Refusal::Missing));
        let open = Auth::disabled().authenticate(None, None, None).unwrap();
        assert_eq!((open.role, open.credential), (Role::Admin, Credential::Open));
    }

    #[test]
    fn token_files_are_reloaded_when_they_change_and_fail_closed() {
        let dir = std::env::temp_dir().join(format!("control-auth-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first-token-0123456789\n").unwrap();
        let a = Auth::from_file(&path).unwrap();
        assert!(a.check(b"first-token-0123456789"));
        // A new file (new inode and length) is seen after the check interval.
        let tmp = dir.join("token.new");
        std::fs::write(&tmp, "second-token-0123456789abc\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(a.check(b"first-token-0123456789"), "re-read before the interval");
        std::thread::sleep(RELOAD_CHECK + Duration::from_millis(50));
        assert!(a.check(b"second-token-0123456789abc"));
        assert!(!a.check(b"first-token-0123456789"));
        // An unusable file refuses every token until it is fixed.
        std::fs::write(&tmp, "short").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        std::thread::sleep(RELOAD_CHECK + Duration::from_millis(50));
        assert!(!a.check(b"second-token-0123456789abc"));
        std::fs::write(&tmp, "third-token-0123456789abcdef").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        std::thread::sleep(RELOAD_CHECK + Duration::from_millis(50));
        assert!(a.check(b"third-token-0123456789abcdef"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
