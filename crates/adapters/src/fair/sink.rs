//! Where `fair-destination` puts its header records: nowhere, or the
//! append-only header store under `store_dir` (the file I/O the protocol
//! crate leaves to its embedder).

use fair::config::FairDestinationConfig;
use fair::record::{Record, RecordSink, RECORD_LEN};
use fair::store::{HeaderStore, StoreConfig};
use runtime::ConfigError;

use crate::params::config_err;

/// Where `fair-destination` puts header records.
pub enum DestSink {
    /// No capture.
    Null,
    /// The append-only header store.
    Store(Box<HeaderStore>),
}

impl DestSink {
    /// The sink of worker `worker` for `c`: the store `<store_dir>/worker-<w>`
    /// (retention `retention_s`, default T_m) opened at `now` (Unix
    /// seconds), or none without `store_dir`.
    pub fn open(c: &FairDestinationConfig, worker: usize, now: u64) -> Result<Self, ConfigError> {
        let Some(dir) = &c.store_dir else { return Ok(DestSink::Null) };
        let mut sc = StoreConfig::new(dir.join(format!("worker-{worker}")));
        if let Some(r) = c.retention_s {
            sc.retention_secs = r;
        }
        let st = HeaderStore::open(sc, now).map_err(|e| config_err("store_dir", e))?;
        Ok(DestSink::Store(Box::new(st)))
    }
}

impl RecordSink for DestSink {
    #[inline]
    fn append(&mut self, r: &Record) {
        if let DestSink::Store(s) = self {
            s.append(r);
        }
    }

    // The destination stage hands over encoded records: copy them into the
    // store's buffer as they are (the trait's default would decode them only
    // for `append` to encode them again).
    #[inline]
    fn append_raw(&mut self, rec: &[u8; RECORD_LEN]) {
        if let DestSink::Store(s) = self {
            s.append_raw(rec);
        }
    }

    fn end_burst(&mut self) {
        if let DestSink::Store(s) = self {
            RecordSink::end_burst(s.as_mut());
        }
    }
}
