//! Reloading the configuration file into a running router (`SIGHUP`).
//!
//! What can change live changes through the same validated path as `ctl`:
//! the parameters of every pipeline stage and of every port's egress
//! discipline, applied in place (state and counters kept) as one
//! generation. What cannot — the backend and its traffic, workers, ports,
//! the pipeline's shape (stages added, removed or of another kind), the
//! control section — is named in [`Reloaded::needs_restart`] and left as
//! it runs.

use runtime::config::RouterConfig;

use crate::error::CtlError;
use crate::plane::{Applied, Change, Plane};

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The live part, applied (or found already in effect).
    pub applied: Applied,
    /// Sections that differ from the running configuration and need a
    /// restart to take effect (e.g. `"workers"`), in file order.
    pub needs_restart: Vec<String>,
}

/// The top-level sections whose changes need a restart, compared as
/// written (`[run]` is left out: the command line may override it).
const RESTART_SECTIONS: &[&str] = &["router", "io", "workers", "control"];

impl Plane {
    /// Applies what differs between the running configuration and `new`
    /// (the configuration file read again) and can change live; reports
    /// what needs a restart. Nothing changes if any new parameter is
    /// refused (the error names it).
    pub fn reload(&self, new: &RouterConfig) -> Result<Reloaded, CtlError> {
        let (cur, _) = self.config();
        let mut needs_restart = changed_sections(&cur, new);
        let same_shape = cur.pipeline.len() == new.pipeline.len()
            && cur.pipeline.iter().zip(&new.pipeline).all(|(a, b)| a.kind == b.kind);
        let same_ports =
            cur.ports.len() == new.ports.len()
                && cur.ports.iter().zip(&new.ports).all(|(a, b)| {
                    a.id == b.id && a.name == b.name && a.egress.kind == b.egress.kind
                });
        let mut change = Change::default();
        if same_shape {
            change.stages =
                new.pipeline.iter().enumerate().map(|(i, s)| (i, s.params.clone())).collect();
        } else {
            needs_restart.push("pipeline (stages added, removed or of another kind)".into());
        }
        if same_ports {
            change.egress =
                new.ports.iter().enumerate().map(|(i, p)| (i, p.egress.params.clone())).collect();
        } else {
            needs_restart.push("ports (ids, names or egress kinds)".into());
        }
        let applied = self.apply(change, "configuration reloaded")?;
        Ok(Reloaded { applied, needs_restart })
    }
}

/// The sections of [`RESTART_SECTIONS`] that the two files write differently.
fn changed_sections(cur: &RouterConfig, new: &RouterConfig) -> Vec<String> {
    let table = |c: &RouterConfig| c.text.parse::<toml::Table>().unwrap_or_default();
    let (a, b) = (table(cur), table(new));
    RESTART_SECTIONS.iter().filter(|s| a.get(**s) != b.get(**s)).map(|s| s.to_string()).collect()
}
