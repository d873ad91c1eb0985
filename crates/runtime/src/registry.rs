//! Stage and egress kinds: a kind name → how to parse its parameters into a
//! typed configuration, and how to build an instance from that configuration.
//!
//! A kind is registered with its typed configuration `C`:
//!
//! ```ignore
//! r.stage::<MyStageConfig>("my-stage", |cfg, ctx| Ok(Box::new(MyStage::new(cfg, ctx.worker))));
//! ```
//!
//! `C` is deserialized from the stage's TOML table (unknown keys and wrong
//! types come back with their key path) and checked with
//! [`pipeline::Validate`]; [`Registry::stage_with`] takes a parser of one's
//! own where a kind needs more (checks against the router's ports, keys in
//! hex). Parsing does not depend on the buffer type, so the control plane
//! parses a live change through the [`Catalog`] view of the same registry
//! and hands the typed value to the running element
//! ([`pipeline::Element::reconfigure`]); building does, and runs once per
//! worker (each worker owns its instances and their state shard) and once
//! more in [`crate::check`].

use std::any::Any;
use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use pipeline::{Egress, PacketBuf, Stage, Validate};

use crate::config::{typed, ConfigError};

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

/// A kind's parsed, validated configuration, of the kind's own type.
pub type Parsed = Box<dyn Any + Send + Sync>;

type ParseFn =
    Box<dyn Fn(&BuildContext, &toml::Table) -> Result<Parsed, ConfigError> + Send + Sync>;
type BuildFn<T> = Box<dyn Fn(&BuildContext, &dyn Any) -> Result<T, ConfigError> + Send + Sync>;

struct Entry<T> {
    parse: ParseFn,
    build: BuildFn<T>,
    footprint: fn(&dyn Any) -> u64,
}

impl<T: 'static> Entry<T> {
    fn new<C: Any + Send + Sync>(
        parse: fn(&BuildContext, &toml::Table) -> Result<C, ConfigError>,
        build: fn(&C, &BuildContext) -> Result<T, ConfigError>,
        footprint: fn(&dyn Any) -> u64,
    ) -> Self {
        Entry {
            footprint,
            parse: Box::new(move |ctx, t| Ok(Box::new(parse(ctx, t)?) as Parsed)),
            build: Box::new(move |ctx, c| {
                let c = c
                    .downcast_ref::<C>()
                    .ok_or_else(|| ConfigError::at("", "configuration of another kind"))?;
                build(c, ctx)
            }),
        }
    }
}

/// Deserializes `C` from a parameter table, validates it and turns its
/// rates into one worker's share ([`Validate::split_rates`]).
pub fn parse_validated<C: DeserializeOwned + Validate>(
    ctx: &BuildContext,
    params: &toml::Table,
) -> Result<C, ConfigError> {
    let mut c: C = typed(params)?;
    c.validate()?;
    c.split_rates(ctx.workers);
    Ok(c)
}

fn footprint_of<C: Validate + Any>(c: &dyn Any) -> u64 {
    c.downcast_ref::<C>().map_or(0, Validate::footprint)
}

/// Stage and egress kinds for buffer type `B`.
pub struct Registry<B> {
    stages: BTreeMap<&'static str, Entry<Box<dyn Stage<B>>>>,
    egresses: BTreeMap<&'static str, Entry<Box<dyn Egress<B>>>>,
}

/// Builds a stage from its typed configuration.
pub type StageBuild<C, B> = fn(&C, &BuildContext) -> Result<Box<dyn Stage<B>>, ConfigError>;
/// Builds an egress discipline from its typed configuration.
pub type EgressBuild<C, B> = fn(&C, &BuildContext) -> Result<Box<dyn Egress<B>>, ConfigError>;
/// Parses a kind's parameter table into its typed configuration.
pub type Parse<C> = fn(&BuildContext, &toml::Table) -> Result<C, ConfigError>;

impl<B: PacketBuf + Send + 'static> Registry<B> {
    /// A registry with nothing in it.
    pub fn empty() -> Self {
        Registry { stages: BTreeMap::new(), egresses: BTreeMap::new() }
    }

    /// The generic kinds of the runtime (`parse`, forwarding, classification,
    /// FIFO and priority egress) plus those of the protocols `P`.
    pub fn with<P: crate::Protocols>() -> Self {
        let mut r = Self::empty();
        crate::stages::register(&mut r);
        crate::egress::register(&mut r);
        P::register(&mut r);
        r
    }

    /// Registers (or replaces) a stage kind whose configuration `C` is
    /// deserialized and validated ([`parse_validated`]).
    pub fn stage<C>(&mut self, kind: &'static str, build: StageBuild<C, B>) -> &mut Self
    where
        C: DeserializeOwned + Validate + Send + Sync + 'static,
    {
        self.stage_checked(kind, |_, _| Ok(()), build)
    }

    /// Registers (or replaces) a stage kind whose configuration `C` is
    /// deserialized, validated and then checked against the router (its
    /// ports) by `check`.
    pub fn stage_checked<C>(
        &mut self,
        kind: &'static str,
        check: fn(&C, &BuildContext) -> Result<(), ConfigError>,
        build: StageBuild<C, B>,
    ) -> &mut Self
    where
        C: DeserializeOwned + Validate + Send + Sync + 'static,
    {
        let e = Entry {
            parse: Box::new(move |ctx, t| {
                let c = parse_validated::<C>(ctx, t)?;
                check(&c, ctx)?;
                Ok(Box::new(c) as Parsed)
            }),
            ..Entry::new(parse_validated::<C>, build, footprint_of::<C>)
        };
        self.stages.insert(kind, e);
        self
    }

    /// Registers (or replaces) a stage kind with its own parser.
    pub fn stage_with<C: Any + Send + Sync>(
        &mut self,
        kind: &'static str,
        parse: Parse<C>,
        build: StageBuild<C, B>,
    ) -> &mut Self {
        self.stages.insert(kind, Entry::new(parse, build, |_| 0));
        self
    }

    /// Registers (or replaces) an egress kind whose configuration `C` is
    /// deserialized and validated.
    pub fn egress<C>(&mut self, kind: &'static str, build: EgressBuild<C, B>) -> &mut Self
    where
        C: DeserializeOwned + Validate + Send + Sync + 'static,
    {
        self.egresses.insert(kind, Entry::new(parse_validated::<C>, build, footprint_of::<C>));
        self
    }

    /// Registers (or replaces) an egress kind with its own parser.
    pub fn egress_with<C: Any + Send + Sync>(
        &mut self,
        kind: &'static str,
        parse: Parse<C>,
        build: EgressBuild<C, B>,
    ) -> &mut Self {
        self.egresses.insert(kind, Entry::new(parse, build, |_| 0));
        self
    }

    /// Registers (or replaces) an egress kind with its own parser whose
    /// configuration reports its memory footprint.
    pub fn egress_sized<C: Validate + Any + Send + Sync>(
        &mut self,
        kind: &'static str,
        parse: Parse<C>,
        build: EgressBuild<C, B>,
    ) -> &mut Self {
        self.egresses.insert(kind, Entry::new(parse, build, footprint_of::<C>));
        self
    }

    /// Builds a stage of `kind` from its parameters; errors name the key
    /// inside `params`.
    pub fn build_stage(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Box<dyn Stage<B>>, ConfigError> {
        let e = entry(&self.stages, "stage", kind)?;
        (e.build)(ctx, &*(e.parse)(ctx, params)?)
    }

    /// Builds an egress discipline of `kind` from its parameters.
    pub fn build_egress(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Box<dyn Egress<B>>, ConfigError> {
        let e = entry(&self.egresses, "egress", kind)?;
        (e.build)(ctx, &*(e.parse)(ctx, params)?)
    }
}

fn entry<'a, T>(
    map: &'a BTreeMap<&'static str, Entry<T>>,
    what: &str,
    kind: &str,
) -> Result<&'a Entry<T>, ConfigError> {
    map.get(kind).ok_or_else(|| {
        let known: Vec<&str> = map.keys().copied().collect();
        ConfigError::at(
            "kind",
            format!("unknown {what} kind `{kind}` (known: {})", known.join(", ")),
        )
    })
}

/// The buffer-independent view of a [`Registry`]: which kinds exist and
/// how their parameters parse. The control plane validates live changes
/// through it, whatever backend the router runs on.
pub trait Catalog: Send + Sync {
    /// Parses and validates the parameters of a stage of `kind`.
    fn parse_stage(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Parsed, ConfigError>;

    /// Parses and validates the parameters of an egress discipline of `kind`.
    fn parse_egress(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Parsed, ConfigError>;

    /// Bytes per worker that an element of stage `kind` with configuration
    /// `parsed` allocates up front (see [`pipeline::Validate::footprint`]).
    fn stage_footprint(&self, kind: &str, parsed: &Parsed) -> u64;

    /// The same for an egress discipline of `kind`.
    fn egress_footprint(&self, kind: &str, parsed: &Parsed) -> u64;

    /// The registered stage kinds, sorted.
    fn stage_kinds(&self) -> Vec<&'static str>;

    /// The registered egress kinds, sorted.
    fn egress_kinds(&self) -> Vec<&'static str>;
}

impl<B: PacketBuf + Send + 'static> Catalog for Registry<B> {
    fn parse_stage(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Parsed, ConfigError> {
        (entry(&self.stages, "stage", kind)?.parse)(ctx, params)
    }

    fn parse_egress(
        &self,
        kind: &str,
        ctx: &BuildContext,
        params: &toml::Table,
    ) -> Result<Parsed, ConfigError> {
        (entry(&self.egresses, "egress", kind)?.parse)(ctx, params)
    }

    fn stage_footprint(&self, kind: &str, parsed: &Parsed) -> u64 {
        self.stages.get(kind).map_or(0, |e| (e.footprint)(&**parsed))
    }

    fn egress_footprint(&self, kind: &str, parsed: &Parsed) -> u64 {
        self.egresses.get(kind).map_or(0, |e| (e.footprint)(&**parsed))
    }

    fn stage_kinds(&self) -> Vec<&'static str> {
        self.stages.keys().copied().collect()
    }

    fn egress_kinds(&self) -> Vec<&'static str> {
        self.egresses.keys().copied().collect()
    }
}
