//! Fig. 8(b): bandwidth waste at B against request/reply loss (what the
//! waste counts and why: see the [parent module's docs](super)).

use std::collections::VecDeque;

use pipeline::Now;
use sibra::host::{self, Reply};
use sibra::{BwClass, Tick};

use super::as_b::{
    build_b, eph_request, steady_setup, through, AS_LEGIT, EPOCH_UNIX_NS, IF_LEGIT, IF_OUT,
};
use super::params::Fig8bParams;
use crate::report::{Plot, Report, Series};
use crate::scenarios::{RunOpts, ScenarioError};

/// Fig. 8(b): for each loss rate, `r_waste` = reserved-but-unused ephemeral
/// bandwidth / all reserved ephemeral bandwidth on the source's steady path
/// at B, averaged over time.
///
/// Requests go through B's real stages in virtual time (one burst each; no
/// queueing matters here). A request lost after B leaves a pending index at
/// B; a reply lost before B does the same; a reply lost after B leaves a
/// confirmed index the source does not know about. In every case the
/// source, having no reply after `reply_timeout_s`, re-sends the same
/// request (up to `max_retries` times). B grants the repeated request on the
/// index it already holds without a new charge, so the lost attempt's
/// bandwidth is wasted only from the loss until the re-sent request is
/// granted (one timeout per loss), not until the index expires or is
/// reclaimed.
/// If the source gives up, B reclaims a pending index after
/// `confirm_ticks`; a confirmed one stays until it expires. Successful
/// reservations count as used until their expiry.
pub fn fig8b(p: &Fig8bParams, opts: &RunOpts) -> Result<(Report, Vec<(f64, f64)>), ScenarioError> {
    p.validate()?;
    let mut rep = Report::new(
        "sibra_fig8b",
        &["loss_rate", "waste_rate", "waste/loss", "requests", "re-sent", "granted"],
    );
    let mut pts = Vec::new();
    for &loss in &p.loss_rates {
        let now0 = Now::from_unix_ns(EPOCH_UNIX_NS);
        let (mut pipeline, control) =
            build_b((p.capacity_gbps * 1e9) as u64, Tick::of(now0), Some(p.confirm_ticks))?;
        let steady = BwClass::floor_from_bps((p.steady_mbps * 1e6) as u64);
        let (sid, block) = steady_setup(&mut pipeline, AS_LEGIT, IF_LEGIT, steady, now0)?;
        let mut rng = crate::rng::Rng::new(p.seed ^ (loss * 1e6) as u64);
        let step_ns = (1e9 / p.requests_per_s) as u64;
        let rtt_ns = (p.reply_timeout_s * 1e9) as u64;
        let end_ns = (p.duration_s * 1e9) as u64;
        let warm_ns = (p.warmup_s * 1e9) as u64;
        // Reservations the sources hold: (last valid tick, bit/s).
        let mut held: Vec<(Tick, u64)> = Vec::new();
        // Requests to re-send: (time, packet, attempts so far); times only grow.
        let mut retries: VecDeque<(u64, Vec<u8>, u32)> = VecDeque::new();
        let (mut sum_reserved, mut sum_unused) = (0f64, 0f64);
        let (mut sent, mut resent, mut granted) = (0u64, 0u64, 0u64);
        let mut t_new = 0u64;
        let mut n = 0u64;
        let mut progress = opts
            .progress
            .then(|| crate::report::stderr_progress(format!("sibra fig8b loss={loss}")));
        let mut last_pct = u64::MAX;
        loop {
            let retry_due = retries.front().is_some_and(|r| r.0 <= t_new);
            let t = if retry_due { retries.front().map_or(t_new, |r| r.0) } else { t_new };
            if t >= end_ns {
                if let Some(f) = progress.as_mut() {
                    f(1.0);
                }
                break;
            }
            if let Some(f) = progress.as_mut() {
                let pct = t * 100 / end_ns;
                if pct != last_pct {
                    last_pct = pct;
                    f(pct as f64 / 100.0);
                }
            }
            let now = Now::from_unix_ns(EPOCH_UNIX_NS + t);
            let tick = Tick::of(now);
            let (pkt, attempts) = if retry_due {
                let (_, pkt, a) = retries.pop_front().expect("front checked");
                resent += 1;
                (pkt, a)
            } else {
                let kbps = p.min_kbps * (p.max_kbps / p.min_kbps).powf(rng.unit());
                let class = BwClass::floor_from_bps((kbps * 1e3) as u64);
                n += 1;
                let pkt = eph_request(AS_LEGIT, n, sid, &block, tick, class)?;
                sent += 1;
                (pkt, 0)
            };
            let mut lost = false;
            if let Some((IF_OUT, mut fwd)) = through(&mut pipeline, &pkt, IF_LEGIT, now) {
                let lost_request = rng.unit() < loss;
                let lost_reply_before_b = rng.unit() < loss / 2.0;
                let lost_reply_after_b = rng.unit() < loss / 2.0;
                if lost_request || lost_reply_before_b {
                    lost = true;
                } else {
                    if let Ok(mut path) = host::sibra_path_mut(&mut fwd) {
                        let _ = host::make_reply(&mut path);
                        let _ = path.set_curr_hop(1);
                    }
                    if let Some((_, back)) = through(&mut pipeline, &fwd, IF_OUT, now) {
                        let ok = host::sibra_path(&back).ok().and_then(|pp| host::reply(&pp).ok());
                        match (ok, lost_reply_after_b) {
                            (Some(Reply::Granted(_)), true) => lost = true,
                            (Some(Reply::Granted(b)), false) => {
                                granted += 1;
                                held.push((b.info.exp_tick, b.info.bw_fwd.bps()));
                            }
                            _ => {}
                        }
                    }
                }
            }
            if lost && attempts < p.max_retries {
                retries.push_back((t + rtt_ns, pkt, attempts + 1));
            }
            if !retry_due {
                // Sample at the (uniformly spaced) new-request instants.
                if t >= warm_ns {
                    held.retain(|(exp, _)| *exp >= tick);
                    let used: u64 = held.iter().map(|h| h.1).sum();
                    let c = control.lock().unwrap_or_else(|e| e.into_inner());
                    let reserved = c.admission().ephemeral_used_on(&sid, true, tick);
                    sum_reserved += reserved as f64;
                    sum_unused += reserved.saturating_sub(used) as f64;
                }
                t_new += step_ns;
            }
        }
        let waste = if sum_reserved > 0.0 { sum_unused / sum_reserved } else { 0.0 };
        rep.row(vec![
            format!("{loss:.3}"),
            format!("{waste:.4}"),
            if loss > 0.0 { format!("{:.2}", waste / loss) } else { "-".into() },
            sent.to_string(),
            resent.to_string(),
            granted.to_string(),
        ]);
        pts.push((loss, waste));
    }
    rep.plots.push(Plot {
        name: "sibra_fig8b_waste".into(),
        title: "SIBRA Fig. 8(b): bandwidth waste vs request/reply loss".into(),
        x_label: "loss rate".into(),
        y_label: "waste rate".into(),
        log_y: false,
        series: vec![Series { name: "r_waste".into(), points: pts.clone() }],
    });
    rep.notes.push(
        format!("waste = reserved-but-unused / reserved ephemeral bandwidth on the steady path at B; a source re-sends a request without reply after {} s (up to {} times), which B grants on the index it already holds; indices of abandoned requests are reclaimed after {} tick(s) of 4 s (pending) or at expiry (confirmed)", p.reply_timeout_s, p.max_retries, p.confirm_ticks),
    );
    rep.notes.push("the paper (Fig. 8b): waste <= 1.4 % at 5 % loss (about 0.3 x the loss rate), growing linearly".into());
    Ok((rep, pts))
}
