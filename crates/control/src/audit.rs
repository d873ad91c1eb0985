//! The audit log: one structured line per mutating call — accepted,
//! refused (no or wrong credential, read-only role, rate limit) or failed.
//!
//! Each line is a JSON object, appended to `control.audit_log` (standard
//! error without it), and the same fields go out as a `tracing` event of
//! target `audit` for a subscriber the embedder installs:
//!
//! ```json
//! {"time":"2025-01-31T12:00:00.123Z","rpc":"ddos.control.v1.RouterControl/SetStageParams",
//!  "result":"OK","caller":"admin-token","role":"admin","subject":null,
//!  "peer":"127.0.0.1:40112","target":"pipeline[1] (zlane-classify) keys rate_bps",
//!  "generation":3}
//! ```
//!
//! * `caller`: the credential (`admin-token`, `read-token`, `certificate`,
//!   `open` without authentication, `none` when none was accepted);
//!   `subject`: the client certificate's subject under mutual TLS.
//! * `result`: the gRPC code (`OK`, `PERMISSION_DENIED`, `INVALID_ARGUMENT`...).
//! * `target`: what the call acted on, as the service describes it (stage
//!   indices, keys, ports, reservation IDs); `null` when the call was refused
//!   before it was read. Request contents are never logged: no token, key
//!   or parameter value reaches this file.
//! * `generation`: the configuration generation after the call.
//! * `suppressed` (only when non-zero): refusals of unauthenticated callers
//!   left out before this line (at most [`REFUSALS_PER_SECOND`] are
//!   written, so that a flood cannot fill the disk).

use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use serde::Serialize;

/// Unauthenticated refusals written per second, at most (burst: as many).
pub const REFUSALS_PER_SECOND: f64 = 20.0;

/// What a mutating call acted on, noted by the services while they run it.
#[derive(Debug, Default)]
pub struct Note {
    target: Mutex<Option<String>>,
}

impl Note {
    fn set(&self, target: &str) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = Some(target.to_string());
    }

    pub(crate) fn get(&self) -> Option<String> {
        self.target.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

tokio::task_local! {
    /// The note of the call the current task serves.
    static TASK_NOTE: Arc<Note>;
}

thread_local! {
    /// The note of the call a blocking task works for.
    static THREAD_NOTE: RefCell<Option<Arc<Note>>> = const { RefCell::new(None) };
}

/// Records what the current call acts on (a later note replaces an
/// earlier one). Services call it with what they would tell the operator
/// (`"pipeline[2] (flowpolice) keys rate"`), never with secret values; the
/// plane notes the description of every change it applies. Outside a
/// mutating call it does nothing.
pub fn note_target(target: &str) {
    if let Some(n) = current() {
        n.set(target);
    }
}

/// The note of the current call, on its task or a blocking task it started.
pub(crate) fn current() -> Option<Arc<Note>> {
    TASK_NOTE.try_with(Arc::clone).ok().or_else(|| THREAD_NOTE.with(|n| n.borrow().clone()))
}

/// Runs `f` with `note` as this thread's note (for blocking tasks).
pub(crate) fn with_note<R>(note: Option<Arc<Note>>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Arc<Note>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let prev = self.0.take();
            THREAD_NOTE.with(|n| *n.borrow_mut() = prev);
        }
    }
    let prev = THREAD_NOTE.with(|n| std::mem::replace(&mut *n.borrow_mut(), note));
    let _reset = Reset(prev);
    f()
}

/// Runs `fut` with `note` as the task's note.
pub(crate) async fn scoped<F: std::future::Future>(note: Arc<Note>, fut: F) -> F::Output {
    TASK_NOTE.scope(note, fut).await
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// UTC, RFC 3339 with milliseconds.
    pub time: String,
    /// `package.Service/Method`.
    pub rpc: String,
    /// The gRPC code name.
    pub result: &'static str,
    /// The credential (see the module docs).
    pub caller: &'static str,
    /// `read`, `admin`, or `null` when unauthenticated.
    pub role: Option<&'static str>,
    /// The client certificate's subject.
    pub subject: Option<String>,
    /// The client's address.
    pub peer: Option<SocketAddr>,
    /// What the call acted on.
    pub target: Option<String>,
    /// The configuration generation after the call.
    pub generation: u64,
    /// Unauthenticated refusals left out before this line.
    #[serde(skip_serializing_if = "is_zero")]
    pub suppressed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

enum Sink {
    Stderr,
    File(Mutex<std::fs::File>),
}

struct Flood {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

/// Where audit lines go.
pub struct AuditLog {
    sink: Sink,
    path: Option<String>,
    flood: Mutex<Flood>,
    failed: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog").field("path", &self.path).finish()
    }
}

/// Whether `path` can take audit lines: its directory exists and the file,
/// if it exists, is a writable regular file (without creating it).
pub fn check_path(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err("is not a regular file".into()),
        Ok(_) => {
            std::fs::OpenOptions::new().append(true).open(path).map(drop).map_err(|e| e.to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if dir.is_dir() {
                Ok(())
            } else {
                Err(format!("directory `{}` does not exist", dir.display()))
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

impl AuditLog {
    /// Appends to `path` (created with mode 0600 if missing), or writes to
    /// standard error without one.
    pub fn open(path: Option<&Path>) -> std::io::Result<AuditLog> {
        let sink = match path {
            None => Sink::Stderr,
            Some(p) => {
                let mut o = std::fs::OpenOptions::new();
                o.append(true).create(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
                Sink::File(Mutex::new(o.open(p)?))
            }
        };
        Ok(AuditLog {
            sink,
            path: path.map(|p| p.display().to_string()),
            flood: Mutex::new(Flood {
                tokens: REFUSALS_PER_SECOND,
                at: Instant::now(),
                suppressed: 0,
            }),
            failed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Writes `r` (an unauthenticated refusal only while under
    /// [`REFUSALS_PER_SECOND`]).
    pub fn write(&self, mut r: Record) {
        {
            let mut f = self.flood.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            f.tokens = (f.tokens + now.duration_since(f.at).as_secs_f64() * REFUSALS_PER_SECOND)
                .min(REFUSALS_PER_SECOND);
            f.at = now;
            if r.role.is_none() {
                if f.tokens < 1.0 {
                    f.suppressed += 1;
                    return;
                }
                f.tokens -= 1.0;
            }
            r.suppressed = std::mem::take(&mut f.suppressed);
        }
        tracing::info!(
            target: "audit",
            time = %r.time,
            rpc = %r.rpc,
            result = r.result,
            caller = r.caller,
            role = r.role.unwrap_or("none"),
            subject = r.subject.as_deref().unwrap_or(""),
            peer = %r.peer.map(|p| p.to_string()).unwrap_or_default(),
            object = r.target.as_deref().unwrap_or(""),
            generation = r.generation,
            suppressed = r.suppressed,
        );
        let mut line = match serde_json::to_vec(&r) {
            Ok(l) => l,
            Err(_) => return,
        };
        line.push(b'\n');
        let res = match &self.sink {
            Sink::Stderr => std::io::stderr().lock().write_all(&line),
            Sink::File(f) => f.lock().unwrap_or_else(|p| p.into_inner()).write_all(&line),
        };
        if let Err(e) = res {
            if !self.failed.swap(true, std::sync::atomic::Ordering::Relaxed) {
                eprintln!("control: audit_log {}: {e}", self.path.as_deref().unwrap_or("stderr"));
            }
        }
    }
}

/// The name of a gRPC code as the protocol spells it (`PERMISSION_DENIED`).
pub fn code_name(c: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match c {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::Unknown => "UNKNOWN",
        C::InvalidArgument => "INVALID_ARGUMENT",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::NotFound => "NOT_FOUND",
        C::AlreadyExists => "ALREADY_EXISTS",
        C::PermissionDenied => "PERMISSION_DENIED",
        C::ResourceExhausted => "RESOURCE_EXHAUSTED",
        C::FailedPrecondition => "FAILED_PRECONDITION",
        C::Aborted => "ABORTED",
        C::OutOfRange => "OUT_OF_RANGE",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Internal => "INTERNAL",
        C::Unavailable => "UNAVAILABLE",
        C::DataLoss => "DATA_LOSS",
        C::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// `t` as RFC 3339 UTC with milliseconds (`2025-01-31T12:00:00.123Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_utc() {
        let at = |s: u64| rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(s));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_738_324_800_123), "2025-01-31T12:00:00.123Z");
        assert_eq!(at(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn notes_reach_blocking_threads_and_not_beyond() {
        let note = Arc::new(Note::default());
        let n2 = note.clone();
        std::thread::spawn(move || {
            with_note(Some(n2), || note_target("pipeline[1]"));
            note_target("elsewhere");
        })
        .join()
        .unwrap();
        assert_eq!(note.get().as_deref(), Some("pipeline[1]"));
        note_target("no call here");
    }

    #[test]
    fn unauthenticated_floods_are_summarized() {
        let dir = std::env::temp_dir().join(format!("control-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let _ = std::fs::remove_file(&path);
        let log = AuditLog::open(Some(&path)).unwrap();
        let rec = |role: Option<&'static str>| Record {
            time: rfc3339(SystemTime::now()),
            rpc: "x.Y/Z".into(),
            result: "UNAUTHENTICATED",
            caller: "none",
            role,
            subject: None,
            peer: None,
            target: None,
            generation: 0,
            suppressed: 0,
        };
        for _ in 0..100 {
            log.write(rec(None));
        }
        log.write(rec(Some("admin")));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(lines.len() <= 25, "{} lines", lines.len());
        let last = lines.last().unwrap();
        assert_eq!(last["role"], "admin");
        assert!(last["suppressed"].as_u64().unwrap() >= 75, "{last}");
        assert!(check_path(&path).is_ok());
        assert!(check_path(&dir.join("missing/x")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
