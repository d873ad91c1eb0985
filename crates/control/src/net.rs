//! Accepting connections for the control servers (gRPC and `/metrics`):
//! a cap on connections open at once, back-off when accepting fails (out of
//! file descriptors), the TLS handshake off the accept loop, and a deadline
//! for a connection's first request and for idle connections.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::subject::Subject;

/// Shortest and longest pause after a failed `accept`.
const BACKOFF_MIN: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Per-listener limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections open at once (including those in their TLS handshake).
    pub(crate) max_connections: usize,
    /// Until the first request (TLS handshake included).
    pub(crate) handshake_timeout: Duration,
    /// With no request in flight.
    pub(crate) idle_timeout: Duration,
}

/// Requests in flight on a connection and when it was last busy, for the
/// idle deadline.
#[derive(Debug)]
pub(crate) struct Activity {
    born: Instant,
    active: AtomicU32,
    /// Milliseconds after `born` of the latest request start or end.
    last_ms: AtomicU64,
    seen_request: AtomicBool,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            born: Instant::now(),
            active: AtomicU32::new(0),
            last_ms: AtomicU64::new(0),
            seen_request: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// A request starts; the returned guard ends it when dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> ActiveGuard {
        self.seen_request.store(true, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
        self.touch();
        ActiveGuard(self.clone())
    }

    /// When the connection is to be closed if nothing happens; `None` while
    /// a request is in flight.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        if self.active.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let wait = if self.seen_request.load(Ordering::Relaxed) {
            limits.idle_timeout
        } else {
            limits.handshake_timeout
        };
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        Some(self.born + last + wait)
    }
}

/// A request in flight (see [`Activity::begin`]).
#[derive(Debug)]
pub(crate) struct ActiveGuard(Arc<Activity>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// What a request knows of its connection (in the request's extensions).
#[derive(Debug, Clone)]
pub struct Peer {
    /// The client's address.
    pub addr: Option<SocketAddr>,
    /// The server's address of the connection.
    pub local: Option<SocketAddr>,
    /// The subject of the client's certificate (verified), under mutual TLS.
    pub subject: Option<Arc<Subject>>,
    pub(crate) activity: Arc<Activity>,
}

/// A TCP stream that fails its reads once its idle deadline passes.
pub(crate) struct Timed {
    tcp: TcpStream,
    activity: Arc<Activity>,
    limits: Limits,
    timer: Pin<Box<Sleep>>,
}

impl Timed {
    fn new(tcp: TcpStream, activity: Arc<Activity>, limits: Limits) -> Timed {
        let first = Instant::now() + limits.handshake_timeout;
        Timed { tcp, activity, limits, timer: Box::pin(tokio::time::sleep_until(first)) }
    }

    /// Err once the connection has been idle (or silent since it opened)
    /// past its deadline; otherwise arms the timer for the next look.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        while self.timer.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            match self.activity.deadline(&self.limits) {
                Some(d) if d <= now => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "connection idle past its deadline",
                    ))
                }
                Some(d) => self.timer.as_mut().reset(d),
                // Busy: look again later.
                None => self.timer.as_mut().reset(now + self.limits.idle_timeout),
            }
        }
        Ok(())
    }
}

impl AsyncRead for Timed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Timed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

enum Io {
    Plain(Timed),
    Tls(Box<TlsStream<Timed>>),
}

/// An accepted connection (after its TLS handshake), holding its place
/// under the listener's connection cap until dropped.
pub(crate) struct Conn {
    io: Io,
    peer: Peer,
    _permit: OwnedSemaphorePermit,
}

impl Conn {
    /// What requests on it know of it.
    pub(crate) fn peer(&self) -> &Peer {
        &self.peer
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

macro_rules! delegate {
    ($self:ident, $io:ident => $e:expr) => {
        match &mut $self.io {
            Io::Plain($io) => {
                let $io = Pin::new($io);
                $e
            }
            Io::Tls($io) => {
                let $io = Pin::new(&mut **$io);
                $e
            }
        }
    };
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, io => io.poll_read(cx, buf))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, io => io.poll_write(cx, buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, io => io.poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, io => io.poll_shutdown(cx))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, io => io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(t) => t.is_write_vectored(),
            Io::Tls(t) => t.is_write_vectored(),
        }
    }
}

/// Accepted connections as the stream tonic serves.
pub(crate) struct Incoming(pub(crate) mpsc::Receiver<Conn>);

impl tokio_stream::Stream for Incoming {
    type Item = Result<Conn, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|c| c.map(Ok))
    }
}

/// Whether an `accept` error means the process or system is out of a
/// resource (back off) rather than one connection failing (go on).
fn out_of_resources(e: &io::Error) -> bool {
    e.raw_os_error()
        .is_some_and(|n| [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM].contains(&n))
        || e.kind() == io::ErrorKind::OutOfMemory
}

/// Accepts on `listener` until the returned receiver is dropped: at most
/// `limits.max_connections` open at once, TLS handshakes (with `tls`) on
/// their own tasks, `what` naming the listener in messages.
pub(crate) fn spawn_accept(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    what: &'static str,
) -> mpsc::Receiver<Conn> {
    let (tx, rx) = mpsc::channel::<Conn>(1);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    tokio::spawn(async move {
        let mut backoff = BACKOFF_MIN;
        loop {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
                _ = tx.closed() => return,
            };
            let (tcp, addr) = loop {
                let r = tokio::select! {
                    r = listener.accept() => r,
                    _ = tx.closed() => return,
                };
                match r {
                    Ok(c) => {
                        backoff = BACKOFF_MIN;
                        break c;
                    }
                    Err(e) if out_of_resources(&e) => {
                        if backoff == BACKOFF_MIN {
                            eprintln!(
                                "control: {what}: accepting connections failed ({e}); backing off"
                            );
                        }
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = tx.closed() => return,
                        }
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                    // One connection failed (reset before accept...): go on.
                    Err(_) => {}
                }
            };
            let _ = tcp.set_nodelay(true);
            let local = tcp.local_addr().ok();
            let tx = tx.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let activity = Arc::new(Activity::new());
                let timed = Timed::new(tcp, activity.clone(), limits);
                let (io, subject) = match tls {
                    None => (Io::Plain(timed), None),
                    Some(acceptor) => match acceptor.accept(timed).await {
                        Ok(s) => {
                            let subject = s
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|c| c.first())
                                .and_then(|c| Subject::of_certificate(c))
                                .map(Arc::new);
                            (Io::Tls(Box::new(s)), subject)
                        }
                        Err(e) => {
                            tracing::info!(target: "control", peer = %addr, listener = what, error = %e, "TLS handshake failed");
                            return;
                        }
                    },
                };
                let peer = Peer { addr: Some(addr), local, subject, activity };
                let _ = tx.send(Conn { io, peer, _permit: permit }).await;
            });
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_errors_back_off_others_do_not() {
        assert!(out_of_resources(&io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(out_of_resources(&io::Error::from_raw_os_error(libc::ENFILE)));
        assert!(!out_of_resources(&io::Error::from_raw_os_error(libc::ECONNABORTED)));
        assert!(!out_of_resources(&io::Error::from(io::ErrorKind::ConnectionReset)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn connections_are_capped_and_silent_ones_closed() {
        use tokio::io::AsyncReadExt;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let limits = Limits {
            max_connections: 1,
            handshake_timeout: Duration::from_millis(200),
            idle_timeout: Duration::from_secs(5),
        };
        let mut rx = spawn_accept(l, None, limits, "test");
        let _a = TcpStream::connect(addr).await.unwrap();
        let mut first = rx.recv().await.unwrap();
        // The second waits while the first holds the only slot.
        let _b = TcpStream::connect(addr).await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(100), rx.recv()).await;
        assert!(waited.is_err(), "a second connection was accepted over the cap");
        // The first, silent, fails its reads after the handshake deadline.
        let t = Instant::now();
        let mut buf = [0u8; 8];
        let r = first.read(&mut buf).await;
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(2));
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(2), rx.recv()).await;
        assert!(second.unwrap().is_some());
    }
}
