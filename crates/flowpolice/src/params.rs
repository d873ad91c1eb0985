//! Algorithm 1 parameters (thesis §3.6.5) and their validation.

/// Most capabilities per period: the verification bitmap `W_V` has 128 bits.
pub const MAX_K_TH: u16 = 128;

/// What the router does with a packet of a policed flow (`R_T = 1`) beyond its
/// window (`P_R > W_R`).
///
/// The thesis (§3.6.3) only *marks* such packets best effort and relies on strict
/// priority at the bottleneck. Strict priority is work-conserving, though: a flat
/// flood keeps whatever capacity the privileged class leaves, so it is not
/// "throttled to almost zero" as the thesis' Fig. 5.3 reports. The thesis also
/// calls a flow whose `packetLoss` exceeds `L↓` *maliciously behaved*, and
/// describes misbehaved flows as those that "keep sending large volume of
/// traffic in spite of severe losses"; [`OverWindow::DropWhenMisbehaving`]
/// (the default) acts on exactly that classification.
///
/// While the router drops a flow's excess, each drop in the first half of a
/// period consumes a packet ID that never comes back: the drop counts as a
/// loss, so a flood's loss evidence keeps reflecting its excess and its window
/// stays at the floor (without it a flow whose excess is dropped at the router
/// would look loss-free and regain its window).
///
/// In configuration files: `"demote"`, `"drop_when_misbehaving"`,
/// `"drop_while_lossy"` or `"drop"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum OverWindow {
    /// Mark over-window packets best effort, always (thesis text, literally).
    Demote,
    /// Drop over-window packets at the router while the flow is classified
    /// misbehaving, mark them best effort otherwise. Default.
    ///
    /// * **Classified** at a period end when the smoothed `packetLoss` is above
    ///   `L↓`, the period just ended was itself lossy (`recentLoss > L↓`:
    ///   fresh evidence, not only history) and the flow sent a large volume
    ///   in it (`P_R` above [`Params::responsive_volume`]). That `P_R` is
    ///   remembered as its classification volume.
    /// * **Released** at a period end when `packetLoss ≤ L↓` (it complied long
    ///   enough for the history to decay) *or* when it backed off: its `P_R`
    ///   fell to `(1 − β)` of its classification volume or below, or to
    ///   [`Params::responsive_volume`]; i.e. it did not "keep sending large
    ///   volume in spite of severe losses".
    ///
    /// The back-off release is what keeps new legitimate flows from being
    /// locked out: a TCP-like flow that starts while a flood is not yet
    /// throttled is classified on losses others caused; once dropped it backs
    /// off to about one packet per RTT, which is still over a window at the
    /// floor, so the router's own (counted) drops would keep its loss high
    /// forever ([`OverWindow::DropWhileLossy`]). A flat flood never halves its
    /// volume and stays dropped; a flow that does halve it only regains best
    /// effort (the thesis' own treatment), and is classified again as soon as
    /// its best-effort excess meets severe loss.
    #[default]
    DropWhenMisbehaving,
    /// Like [`OverWindow::DropWhenMisbehaving`] without the back-off release:
    /// dropped while the smoothed `packetLoss` is above `L↓` at each period
    /// end. The router's own drops count as losses, so a flow whose minimum
    /// rate (e.g. TCP's one packet per RTT) exceeds its window never leaves
    /// this state while it sends (the policy of earlier versions; kept for
    /// comparison).
    DropWhileLossy,
    /// Drop over-window packets of every policed flow (hard rate limiting, for a
    /// router that owns the bottleneck link; not work-conserving).
    Drop,
}

/// The window `R_W` a flow gets when policing starts (Algorithm 1 line 19 and
/// the first `RateLimit()`); the thesis names it without defining it.
///
/// In configuration files: `"received"` or `"delivered"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum InitialWindow {
    /// `P_R` of the period just ended: what the router received (spec decision,
    /// default).
    #[default]
    Received,
    /// `P_R · (1 − recentLoss)`: what the flow got through, as inferred from
    /// the returned capabilities (Algorithm 1's comment "set W_R as the
    /// received packet counter" read at the receiver). A flood's first period
    /// is mostly lost, so it starts policed at about its delivered share
    /// instead of congesting the privileged class with its whole volume.
    Delivered,
}

/// Why a [`Params`] value was rejected; names the parameter and the allowed range.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum ParamsError {
    /// A parameter lies outside its allowed range.
    #[error("flowpolice parameter `{name}` = {value} is outside {range}")]
    OutOfRange {
        /// Parameter name as in the configuration file.
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// The allowed range, human readable.
        range: &'static str,
    },
    /// `l_up` must be strictly below `l_down` (otherwise AIMD has no hold band).
    #[error("flowpolice parameter `l_up` ({l_up}) must be below `l_down` ({l_down})")]
    ThresholdOrder {
        /// L↑.
        l_up: f64,
        /// L↓.
        l_down: f64,
    },
}

/// Every knob of the rate-limiting logic, with the thesis defaults.
///
/// Times are in milliseconds of the router's monotonic clock (the wire
/// timestamp is that clock modulo 2^32).
///
/// The `params` table of a `flowpolice` stage: every key is optional and
/// defaults as here; [`Params::validate`] checks the ranges.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Params {
    /// Detection period `D_p` in ms (thesis: 2–4 s; default 3 s). Allowed 100 ms – 60 s
    /// so simulations can compress time.
    pub period_ms: u32,
    /// `K_th`: capabilities issued per period per flow (1..=128, default 128).
    pub k_th: u16,
    /// `β`: multiplicative decrease factor, `W_R ← (1−β)·W_R` (0 < β < 1, default 0.5).
    pub beta: f64,
    /// `Δ`: additive increase per period in packets (default 3, ≤ 65535).
    pub delta: u32,
    /// `L↓`: loss above which the window is cut (default 0.05).
    pub l_down: f64,
    /// `L↑`: loss below which the window grows and a period counts as "low loss"
    /// (default 0.01).
    pub l_up: f64,
    /// `λ`: weight of the loss history (0 ≤ λ < 1, default 0.5).
    pub lambda: f64,
    /// `S_Th`: policing stops once more than `S_Th` consecutive low-loss periods were seen
    /// (thesis: 10–100, default 20; allowed 1..=10 000).
    pub s_th: u32,
    /// Smallest window Algorithm 1 may cut to, in packets (default 1). The thesis has no
    /// floor; without one `W_R` reaches 0 after ~32 cuts and the additive increase must
    /// start from nothing. A floor of 1 keeps one privileged packet per period.
    pub w_min: u32,
    /// Accept a valid capability from the period just before the current one as a
    /// *ticket* (forward and restamp the packet) without counting it as feedback
    /// (default `true`). With `false` (the strict reading of thesis §3.6.2) such packets
    /// are dropped as expired, which also drops every packet a sender emits in the
    /// first RTT of each period, before a fresh capability came back.
    pub accept_previous_period: bool,
    /// Entries whose last period started more than this many periods ago may be
    /// reclaimed by a new flow (default 2, allowed 2..=1000).
    pub idle_periods: u32,
    /// What happens to packets over the window (default
    /// [`OverWindow::DropWhenMisbehaving`]; see there for when a flow counts
    /// as misbehaving). A packet the router drops for this reason while
    /// capabilities are being issued (first half of the period, `P_id < K_th`)
    /// consumes a packet ID that never comes back: the drop counts as a loss.
    pub over_window: OverWindow,
    /// `R_W`, the window policing starts from (default
    /// [`InitialWindow::Received`]).
    pub initial_window: InitialWindow,
    /// Packets per period up to which a flow is never dropped for
    /// misbehaving, only demoted (see [`Params::responsive_volume()`]);
    /// `None` (default): `⌈K_th / 8⌉`. Allowed 0..=1 048 576.
    pub responsive_volume: Option<u32>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            period_ms: 3_000,
            k_th: MAX_K_TH,
            beta: 0.5,
            delta: 3,
            l_down: 0.05,
            l_up: 0.01,
            lambda: 0.5,
            s_th: 20,
            w_min: 1,
            accept_previous_period: true,
            idle_periods: 2,
            over_window: OverWindow::DropWhenMisbehaving,
            initial_window: InitialWindow::Received,
            responsive_volume: None,
        }
    }
}

fn check(name: &'static str, ok: bool, value: f64, range: &'static str) -> Result<(), ParamsError> {
    if ok {
        Ok(())
    } else {
        Err(ParamsError::OutOfRange { name, value, range })
    }
}

impl Params {
    /// Checks every parameter against its allowed range.
    pub fn validate(&self) -> Result<(), ParamsError> {
        check(
            "period_ms",
            (100..=60_000).contains(&self.period_ms),
            self.period_ms.into(),
            "[100, 60000]",
        )?;
        check("k_th", (1..=MAX_K_TH).contains(&self.k_th), self.k_th.into(), "[1, 128]")?;
        check("beta", self.beta > 0.0 && self.beta < 1.0, self.beta, "(0, 1)")?;
        check("delta", self.delta <= 65_535, self.delta.into(), "[0, 65535]")?;
        check("l_down", self.l_down > 0.0 && self.l_down <= 1.0, self.l_down, "(0, 1]")?;
        check("l_up", self.l_up >= 0.0 && self.l_up < 1.0, self.l_up, "[0, 1)")?;
        if self.l_up >= self.l_down {
            return Err(ParamsError::ThresholdOrder { l_up: self.l_up, l_down: self.l_down });
        }
        check("lambda", (0.0..1.0).contains(&self.lambda), self.lambda, "[0, 1)")?;
        check("s_th", (1..=10_000).contains(&self.s_th), self.s_th.into(), "[1, 10000]")?;
        check("w_min", self.w_min <= 1 << 20, self.w_min.into(), "[0, 1048576]")?;
        if let Some(v) = self.responsive_volume {
            check("responsive_volume", v <= 1 << 20, v.into(), "[0, 1048576]")?;
        }
        check(
            "idle_periods",
            (2..=1000).contains(&self.idle_periods),
            self.idle_periods.into(),
            "[2, 1000]",
        )?;
        Ok(())
    }

    /// Half a period: capabilities are only issued before `T_A + D_p/2`.
    #[inline]
    pub const fn half_period_ms(&self) -> u64 {
        self.period_ms as u64 / 2
    }

    /// How long (ms) a flow must have been idle to be reclaimed: more than
    /// `idle_periods` periods since its current one started.
    #[inline]
    pub const fn idle_ms(&self) -> u64 {
        self.idle_periods as u64 * self.period_ms as u64
    }

    /// Packets per period up to which a flow is never dropped for
    /// misbehaving, only demoted ([`OverWindow::DropWhenMisbehaving`]):
    /// `⌈K_th / 8⌉` (16 at the default `K_th`). A responsive sender that
    /// lost everything for a while sends about that little (a TCP in
    /// retransmission-timeout back-off sends a few segments per period),
    /// while the router's drops, counted as its losses, would keep it over
    /// a window at the floor; a flood sending this little is only what the
    /// thesis' marking lets through anyway. The field of the same name sets
    /// it; by default it follows `K_th`, the per-period feedback budget.
    #[inline]
    pub const fn responsive_volume(&self) -> u32 {
        match self.responsive_volume {
            Some(v) => v,
            None => (self.k_th as u32).div_ceil(8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_thesis_values_and_valid() {
        let p = Params::default();
        assert_eq!((p.period_ms, p.k_th, p.delta, p.s_th), (3000, 128, 3, 20));
        assert_eq!((p.beta, p.l_down, p.l_up, p.lambda), (0.5, 0.05, 0.01, 0.5));
        p.validate().unwrap();
        assert_eq!(p.responsive_volume(), 16);
        assert_eq!(Params { k_th: 20, ..p }.responsive_volume(), 3);
        assert_eq!(Params { responsive_volume: Some(40), ..p }.responsive_volume(), 40);
    }

    #[test]
    fn ranges_are_enforced() {
        let bad = [
            Params { k_th: 0, ..Params::default() },
            Params { k_th: 129, ..Params::default() },
            Params { beta: 1.0, ..Params::default() },
            Params { beta: f64::NAN, ..Params::default() },
            Params { lambda: 1.0, ..Params::default() },
            Params { period_ms: 50, ..Params::default() },
            Params { s_th: 0, ..Params::default() },
            Params { idle_periods: 1, ..Params::default() },
            Params { responsive_volume: Some((1 << 20) + 1), ..Params::default() },
        ];
        for p in bad {
            assert!(matches!(p.validate(), Err(ParamsError::OutOfRange { .. })), "{p:?}");
        }
        let p = Params { l_up: 0.05, l_down: 0.05, ..Params::default() };
        assert!(matches!(p.validate(), Err(ParamsError::ThresholdOrder { .. })));
    }
}
