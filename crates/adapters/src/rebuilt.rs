//! Protocol elements that a live change rebuilds from their parameters.
//!
//! [`Rebuilt`] keeps the constructor next to the running stage (or egress
//! discipline) and, on [`Element::reconfigure`], builds a fresh instance on
//! the worker from the new parameters and swaps it in. Soft state (tables,
//! token-bucket levels, queued packets) starts afresh, so kinds move from
//! here to in-place changes of their own.

use std::any::Any;

use pipeline::{
    config_of, Batch, Class, DropReason, Egress, Element, Now, PacketBuf, Reconfigured, Refused,
    Stage,
};
use runtime::{BuildContext, ConfigError};

/// A running element and how to build it again.
pub(crate) struct Rebuilt<S, C> {
    inner: S,
    ctx: BuildContext,
    make: fn(&C, &BuildContext) -> Result<S, ConfigError>,
    queued_lost: fn(&S) -> u64,
}

/// Builds a stage of configuration `c` that a live change rebuilds.
pub(crate) fn rebuilt<B, S, C>(
    c: &C,
    ctx: &BuildContext,
    make: fn(&C, &BuildContext) -> Result<S, ConfigError>,
) -> Result<Box<dyn Stage<B>>, ConfigError>
where
    B: PacketBuf,
    S: Stage<B> + 'static,
    C: Any,
{
    Ok(Box::new(Rebuilt { inner: make(c, ctx)?, ctx: ctx.clone(), make, queued_lost: |_| 0 }))
}

/// Builds an egress discipline of configuration `c` that a live change rebuilds.
pub(crate) fn rebuilt_egress<B, S, C>(
    c: &C,
    ctx: &BuildContext,
    make: fn(&C, &BuildContext) -> Result<S, ConfigError>,
) -> Result<Box<dyn Egress<B>>, ConfigError>
where
    B: PacketBuf + 'static,
    S: Egress<B> + 'static,
    C: Any,
{
    Ok(Box::new(Rebuilt {
        inner: make(c, ctx)?,
        ctx: ctx.clone(),
        make,
        queued_lost: |s: &S| s.queued() as u64,
    }))
}

impl<S: Element, C: Any> Element for Rebuilt<S, C> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.inner.named_counters(out);
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        self.inner.as_any_mut()
    }

    fn reconfigure(&mut self, config: &dyn Any, _now: Now) -> Result<Reconfigured, Refused> {
        let c = config_of::<C>(config, self.inner.name())?;
        let fresh = (self.make)(c, &self.ctx)
            .map_err(|e| Refused::Invalid(pipeline::Invalid::at(e.key, e.reason)))?;
        let lost = (self.queued_lost)(&self.inner);
        self.inner = fresh;
        Ok(Reconfigured::Applied { lost })
    }
}

impl<B: PacketBuf, S: Stage<B>, C: Any> Stage<B> for Rebuilt<S, C> {
    #[inline]
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        self.inner.process(batch, now);
    }
}

impl<B: PacketBuf, S: Egress<B>, C: Any> Egress<B> for Rebuilt<S, C> {
    #[inline]
    fn enqueue(&mut self, buf: B, class: Class, now: Now) -> Result<(), (B, DropReason)> {
        self.inner.enqueue(buf, class, now)
    }

    #[inline]
    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<B>) -> usize {
        self.inner.dequeue(now, max, out)
    }

    #[inline]
    fn queued(&self) -> usize {
        self.inner.queued()
    }
}
