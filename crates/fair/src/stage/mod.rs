//! The pipeline face of the FAIR stages: each router stage kind built from
//! its typed configuration ([`crate::config`]), changed in place by a new one
//! ([`Element::reconfigure`](pipeline::Element::reconfigure)), and its named
//! counters. The per-packet procedures are the role modules'
//! ([`crate::source`], [`crate::transit`], [`crate::dest`], [`crate::sb`]).
//!
//! | Kind | Built by | A live change keeps | Needs a restart |
//! |---|---|---|---|
//! | `fair-source` | [`FairSource::from_config`](crate::source::FairSource::from_config) | per channel (same `prefix`): sequence counter, bucket level (retuned), counters | — |
//! | `fair-transit` | [`FairTransit::from_config`](crate::transit::FairTransit::from_config) | nonce generator, counters; keys rotated in beyond the configured range | `seed` |
//! | `fair-destination` | [`FairDestination::from_config`](crate::dest::FairDestination::from_config) | per channel (same source AS, neighbor, slot count): policer level (retuned), monitor, counters | `store_dir`, `retention_s` |
//! | `suspicious-bit` | [`SuspiciousBit::from_config`](crate::sb::SuspiciousBit::from_config) | suspicious ports, flagged sources (their flag time), counters | — |
//!
//! A retuned bucket earns tokens at the old rate up to the change, then
//! runs at the new one with its level clamped to the new burst. Channels
//! are kept in configuration order (a channel's id is its index, as after a
//! restart); a channel the new configuration drops is gone, a new one
//! starts as at a restart (full bucket, sequence counter 0). Every change
//! is checked before anything is touched: a refused change leaves the stage
//! as it was. A stage built in code (no configuration) refuses live changes
//! ([`Refused::Unsupported`](pipeline::Refused::Unsupported)).

/// `Element` for a stage of this crate built from its typed configuration
/// `$cfg` (held in its `configured` field): its name, its named counters
/// (fields of its `stats`, plus named expressions of the stage `$s`), its
/// concrete type (`any`; `opaque` keeps it hidden), and `reconfigure`:
/// `Unchanged` for an equal configuration, else the stage's
/// `apply_config(new, old, now)`, after which the new configuration is the
/// running one; a refused change keeps the old one. A stage built in code
/// (no configuration) refuses.
macro_rules! configured_element {
    (@as_any any) => {
        fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
            Some(self)
        }
    };
    (@as_any opaque) => {};
    (
        $name:literal, $cfg:ty, $any:ident impl[$($g:tt)*] $ty:ty,
        stats[$($c:ident),* $(,)?] $(, $extra:literal => |$s:ident| $e:expr)* $(,)?
    ) => {
        impl<$($g)*> pipeline::Element for $ty {
            fn name(&self) -> &str {
                $name
            }

            fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
                $(out(stringify!($c), self.stats.$c);)*
                $(out($extra, { let $s = self; $e });)*
            }

            configured_element!(@as_any $any);

            fn reconfigure(
                &mut self,
                config: &dyn core::any::Any,
                now: pipeline::Now,
            ) -> Result<pipeline::Reconfigured, pipeline::Refused> {
                let new = pipeline::config_of::<$cfg>(config, $name)?;
                let old = self.configured.take().ok_or(pipeline::Refused::Unsupported)?;
                let done = if *new == *old {
                    Ok(pipeline::Reconfigured::Unchanged)
                } else {
                    self.apply_config(new, &old, now).map(|()| pipeline::Reconfigured::APPLIED)
                };
                self.configured = Some(match done {
                    Ok(pipeline::Reconfigured::Applied { .. }) => Box::new(new.clone()),
                    _ => old,
                });
                done
            }
        }
    };
}

mod dest;
mod sb;
mod source;
mod transit;

/// Refuses the first of `keys` (name, whether its value changed) that
/// changed: what a stage cannot take while running.
fn fixed(keys: &[(&str, bool)]) -> Result<(), pipeline::Refused> {
    match keys.iter().find(|(_, changed)| *changed) {
        Some((key, _)) => Err(pipeline::Refused::NeedsRestart((*key).into())),
        None => Ok(()),
    }
}

/// The channels of a new configuration `new` (in its order) from the
/// running ones (`running[j]` configured by `old[j]`): a running channel of
/// the same identity (`id`), changed in place by `keep(index, channel, old,
/// new)`, else a fresh one (`fresh(index, new)`). Also returns the running
/// channels the new configuration drops.
fn carry<T, C, K: PartialEq>(
    running: Vec<T>,
    old: &[C],
    new: &[C],
    id: impl Fn(&C) -> K,
    mut keep: impl FnMut(usize, &mut T, &C, &C),
    mut fresh: impl FnMut(usize, &C) -> T,
) -> (Vec<T>, Vec<T>) {
    let mut slots: Vec<Option<T>> = running.into_iter().map(Some).collect();
    let out = new
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let j = old.iter().position(|o| id(o) == id(c));
            match j.and_then(|j| Some((j, slots.get_mut(j)?.take()?))) {
                Some((j, mut t)) => {
                    keep(i, &mut t, &old[j], c);
                    t
                }
                None => fresh(i, c),
            }
        })
        .collect();
    (out, slots.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests;
