//! TLS for the control servers (rustls with the *ring* provider, no
//! OpenSSL): the server's certificate chain and key, and for mutual TLS
//! the CA whose client certificates are accepted (required, verified,
//! valid now).

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

use crate::config::TlsConfig;

/// Largest PEM file read (certificate chains and keys are a few KiB).
const MAX_PEM: u64 = 1 << 20;

/// A TLS file that cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("control.{key} `{file}`: {reason}")]
pub struct TlsError {
    /// `tls.cert_chain`, `tls.key` or `tls.client_ca`.
    pub key: &'static str,
    /// The file.
    pub file: String,
    /// Why.
    pub reason: String,
}

/// The server side of TLS, for gRPC (ALPN `h2`) and `/metrics` (`http/1.1`).
#[derive(Clone)]
pub struct TlsSetup {
    /// For the gRPC listener.
    pub grpc: Arc<ServerConfig>,
    /// For the metrics listener.
    pub metrics: Arc<ServerConfig>,
    /// Whether clients must present certificates.
    pub mutual: bool,
}

impl std::fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSetup").field("mutual", &self.mutual).finish_non_exhaustive()
    }
}

/// The crypto provider every TLS object here uses (explicit, so that no
/// process-wide default has to be installed).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let err = |reason: String| TlsError { key, file: path.display().to_string(), reason };
    let len = std::fs::metadata(path).map_err(|e| err(e.to_string()))?.len();
    if len > MAX_PEM {
        return Err(err(format!("{len} bytes; a PEM file here is at most {MAX_PEM}")));
    }
    std::fs::read(path).map_err(|e| err(e.to_string()))
}

/// Every certificate of a PEM file (at least one).
pub fn certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let err = |reason: String| TlsError { key, file: path.display().to_string(), reason };
    let pem = read_pem(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(err("holds no `BEGIN CERTIFICATE` block".into()));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn private_key(key: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read_pem(key, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError {
        key,
        file: path.display().to_string(),
        reason: format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
    })
}

/// Loads `[control.tls]`: the chain must match the key, the client CA
/// must hold usable CA certificates.
pub fn load(cfg: &TlsConfig) -> Result<TlsSetup, TlsError> {
    let provider = provider();
    let chain = certificates("tls.cert_chain", &cfg.cert_chain)?;
    let key = private_key("tls.key", &cfg.key)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError {
            key: "tls",
            file: cfg.cert_chain.display().to_string(),
            reason: e.to_string(),
        })?;
    let builder = match &cfg.client_ca {
        Some(ca) => {
            let err = |reason: String| TlsError {
                key: "tls.client_ca",
                file: ca.display().to_string(),
                reason,
            };
            let mut roots = RootCertStore::empty();
            for c in certificates("tls.client_ca", ca)? {
                roots.add(c).map_err(|e| err(format!("not a usable CA certificate: {e}")))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| err(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut grpc = builder.with_single_cert(chain, key).map_err(|e| TlsError {
        key: "tls.key",
        file: cfg.key.display().to_string(),
        reason: format!("does not fit the certificate chain `{}`: {e}", cfg.cert_chain.display()),
    })?;
    let mut metrics = grpc.clone();
    grpc.alpn_protocols = vec![b"h2".to_vec()];
    metrics.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsSetup {
        grpc: Arc::new(grpc),
        metrics: Arc::new(metrics),
        mutual: cfg.client_ca.is_some(),
    })
}
