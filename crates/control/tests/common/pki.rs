//! Certificates made for a test: a CA, a server certificate for
//! `127.0.0.1`/`localhost`, client certificates (valid or expired).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate and its key, as PEM.
pub struct Pem {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
}

impl Pem {
    /// Writes `<name>.crt` and `<name>.key` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let c = dir.join(format!("{name}.crt"));
        let k = dir.join(format!("{name}.key"));
        std::fs::write(&c, &self.cert).unwrap();
        std::fs::write(&k, &self.key).unwrap();
        (c, k)
    }
}

/// A certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// Its certificate (PEM).
    pub cert: String,
}

impl Ca {
    /// A new self-signed CA called `name`.
    pub fn new(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap().pem();
        Ca { issuer: Issuer::new(p, key), cert }
    }

    /// Writes the CA certificate as `<name>.crt` into `dir`.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let c = dir.join(format!("{name}.crt"));
        std::fs::write(&c, &self.cert).unwrap();
        c
    }

    fn sign(&self, mut p: CertificateParams, cn: &str, eku: ExtendedKeyUsagePurpose) -> Pem {
        p.distinguished_name.push(DnType::CommonName, cn);
        p.distinguished_name.push(DnType::OrganizationName, "Router Test");
        p.extended_key_usages = vec![eku];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap().pem();
        Pem { cert, key: key.serialize_pem() }
    }

    /// A server certificate for `127.0.0.1` and `localhost`.
    pub fn server(&self) -> Pem {
        let p =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        self.sign(p, "router", ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate with common name `cn`, valid now or (with
    /// `expired`) only in 2000.
    pub fn client(&self, cn: &str, expired: bool) -> Pem {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        if expired {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2000, 12, 31);
        }
        self.sign(p, cn, ExtendedKeyUsagePurpose::ClientAuth)
    }
}
