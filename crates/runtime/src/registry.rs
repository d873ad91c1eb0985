//! Stage and egress registries: kind name → constructor from a TOML table.
//!
//! Wiring a protocol stage into the router is one entry here (see
//! [`Registry::builtin`]) plus the stage's config struct:
//!
//! ```ignore
//! r.stage("my-stage", |ctx, params| {
//!     let cfg: MyStageConfig = typed(params)?;      // key-path errors for free
//!     Ok(Box::new(MyStage::new(cfg, ctx.worker)))
//! });
//! ```
//!
//! Constructors run once per worker (each worker owns its stage instances and
//! their state shard) and once more during [`crate::Runtime::check`] to validate
//! the parameters before any worker starts.

use std::collections::BTreeMap;

use pipeline::{Egress, PacketBuf, Stage};

use crate::config::ConfigError;

/// What a constructor knows about where its instance will run.
#[derive(Debug, Clone)]
pub struct BuildContext {
    /// Index of the worker that will own the instance.
    pub worker: usize,
    /// Number of workers (state is sharded across them by RSS hash).
    pub workers: usize,
    /// The configured port ids.
    pub ports: Vec<u16>,
}

impl BuildContext {
    /// Whether `port` is a configured port.
    pub fn has_port(&self, port: u16) -> bool {
        self.ports.contains(&port)
    }

    /// Checks that `port` (at key `key`) is configured.
    pub fn check_port(&self, key: &str, port: u16) -> Result<(), ConfigError> {
        if self.has_port(port) {
            Ok(())
        } else {
            Err(ConfigError::at(key, format!("port {port} is not in [[ports]]")))
        }
    }
}

/// Builds a stage from its parameter table.
pub type StageCtor<B> = fn(&BuildContext, &toml::Table) -> Result<Box<dyn Stage<B>>, ConfigError>;
/// Builds an egress discipline from its parameter table.
pub type EgressCtor<B> = fn(&BuildContext, &toml::Table) -> Result<Box<dyn Egress<B>>, ConfigError>;

/// Named constructors for stages and egress disciplines, for buffer type `B`.
pub struct Registry<B> {
    stages: BTreeMap<&'static str, StageCtor<B>>,
    egresses: BTreeMap<&'static str, EgressCtor<B>>,
}

impl<B: PacketBuf + Send + 'static> Default for Registry<B> {
    fn default() -> Self {
        Self::builtin()
    }
}

impl<B: PacketBuf + Send + 'static> Registry<B> {
    /// A registry with nothing in it.
    pub fn empty() -> Self {
        Registry { stages: BTreeMap::new(), egresses: BTreeMap::new() }
    }

    /// Every stage and egress kind this build of the router knows.
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        crate::stages::register(&mut r);
        crate::egress::register(&mut r);
        crate::protocols::register(&mut r);
        r
    }

    /// Registers (or replaces) a stage kind.
    pub fn stage(&mut self, kind: &'static str, ctor: StageCtor<B>) -> &mut Self {
        self.stages.insert(kind, ctor);
        self
    }

    /// Registers (or replaces) an egress kind.
    pub fn egress(&mut self, kind: &'static str, ctor: EgressCtor<B>) -> &mut Self {
        self.egresses.insert(kind, ctor);
        self
    }

    /// The registered stage kinds, sorted.
    pub fn stage_kinds(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.stages.keys().copied()
    }

    /// The registered egress kinds, sorted.
    pub fn egress_kinds(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.egresses.keys().copied()
    }

    /// Builds a stage of `kind`; errors name the key inside `params`.
    pub fn build_stage(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Box<dyn Stage<B>>, ConfigError> {
        let ctor = self.stages.get(kind).ok_or_else(|| {
            let known: Vec<_> = self.stage_kinds().collect();
            ConfigError::at(
                "kind",
                format!("unknown stage kind `{kind}` (known: {})", known.join(", ")),
            )
        })?;
        ctor(ctx, params)
    }

    /// Builds an egress discipline of `kind`.
    pub fn build_egress(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Box<dyn Egress<B>>, ConfigError> {
        let ctor = self.egresses.get(kind).ok_or_else(|| {
            let known: Vec<_> = self.egress_kinds().collect();
            ConfigError::at(
                "kind",
                format!("unknown egress kind `{kind}` (known: {})", known.join(", ")),
            )
        })?;
        ctor(ctx, params)
    }
}
