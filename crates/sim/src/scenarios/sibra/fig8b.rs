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
        // One admitting AS per hop of the longest path; a request of length
        // L crosses the first L of them. They share key and interfaces, so
        // the steady block of one is the steady block of every other.
        let mut hops = Vec::new();
        let mut path = None;
        let steady = BwClass::floor_from_bps((p.steady_mbps * 1e6) as u64);
        for _ in 0..p.path_len[1] {
            let (mut pipeline, control) = build_b(
                (p.capacity_gbps * 1e9) as u64,
                Tick::of(now0),
                Some(p.confirm_ticks),
                None,
            )?;
            path = Some(steady_setup(&mut pipeline, AS_LEGIT, IF_LEGIT, steady, now0)?);
            hops.push((pipeline, control));
        }
        let (sid, block) = path.ok_or_else(|| ScenarioError::Param("no hop".into()))?;
        let mut rng = crate::rng::Rng::new(p.seed ^ (loss * 1e6) as u64);
        let step_ns = (1e9 / p.requests_per_s) as u64;
        let rtt_ns = (p.reply_timeout_s * 1e9) as u64;
        let end_ns = (p.duration_s * 1e9) as u64;
        let warm_ns = (p.warmup_s * 1e9) as u64;
        // Reservations the sources hold: (last valid tick, bit/s x hops).
        let mut held: Vec<(Tick, u64)> = Vec::new();
        // Requests to re-send: (time, packet, path length, attempts so far);
        // times only grow.
        let mut retries: VecDeque<(u64, Vec<u8>, usize, u32)> = VecDeque::new();
        let (mut sum_reserved, mut sum_unused) = (0f64, 0f64);
        let (mut sent, mut resent, mut granted) = (0u64, 0u64, 0u64);
        let mut t_new = 0u64;
        let mut n = 0u64;
        let mut progress = opts
            .progress
            .then(|| crate::report::stderr_progress(format!("sibra fig8b loss={loss}")));
        let mut last_pct = u64::MAX;
        let span = u64::from(p.path_len[1] - p.path_len[0]) + 1;
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
            let (pkt, len, attempts) = if retry_due {
                let (_, pkt, len, a) = retries.pop_front().expect("front checked");
                resent += 1;
                (pkt, len, a)
            } else {
                let kbps = p.min_kbps * (p.max_kbps / p.min_kbps).powf(rng.unit());
                let class = BwClass::floor_from_bps((kbps * 1e3) as u64);
                n += 1;
                let pkt = eph_request(AS_LEGIT, n, sid, &block, tick, class)?;
                sent += 1;
                let len = p.path_len[0] as usize + rng.below(span) as usize;
                (pkt, len, 0)
            };
            // The request is lost on one of the len + 1 links (before the
            // first hop .. after the last), the reply likewise on its way back.
            let lost_request = rng.unit() < loss;
            let req_at = rng.below(len as u64 + 1) as usize;
            let reached = if lost_request { req_at } else { len };
            let lost_reply = !lost_request && rng.unit() < loss;
            // Hops at index >= reply_from see the reply (it comes from the far end).
            let reply_from = if lost_reply { rng.below(len as u64 + 1) as usize } else { 0 };
            let mut fwd_out = Vec::new();
            let mut all_ok = true;
            for (pipeline, _) in hops.iter_mut().take(reached) {
                match through(pipeline, &pkt, IF_LEGIT, now) {
                    Some((IF_OUT, fwd)) => fwd_out.push(fwd),
                    _ => {
                        all_ok = false;
                        break;
                    }
                }
            }
            let mut lost = lost_request || lost_reply;
            let mut grant = None;
            if all_ok && !lost_request {
                for (h, (pipeline, _)) in hops.iter_mut().enumerate().take(len).rev() {
                    if h < reply_from {
                        break;
                    }
                    let mut back = fwd_out[h].clone();
                    if let Ok(mut path) = host::sibra_path_mut(&mut back) {
                        let _ = host::make_reply(&mut path);
                        let _ = path.set_curr_hop(1);
                    }
                    if let Some((_, back)) = through(pipeline, &back, IF_OUT, now) {
                        let ok = host::sibra_path(&back).ok().and_then(|pp| host::reply(&pp).ok());
                        if let Some(Reply::Granted(b)) = ok {
                            grant = Some(b);
                        }
                    }
                }
                let accepted = fwd_out
                    .last()
                    .is_some_and(|f| host::sibra_path(f).is_ok_and(|pp| pp.accepted()));
                if !accepted {
                    // Denied: the source takes the offer, nothing to re-send.
                    lost = false;
                } else if let (Some(b), false) = (grant, lost_reply) {
                    granted += 1;
                    held.push((b.info.exp_tick, b.info.bw_fwd.bps() * len as u64));
                }
            }
            if lost && attempts < p.max_retries {
                retries.push_back((t + rtt_ns, pkt, len, attempts + 1));
            }
            if !retry_due {
                // Sample at the (uniformly spaced) new-request instants.
                if t >= warm_ns {
                    held.retain(|(exp, _)| *exp >= tick);
                    let used: u64 = held.iter().map(|h| h.1).sum();
                    let reserved: u64 = hops
                        .iter()
                        .map(|(_, c)| {
                            let c = c.lock().unwrap_or_else(|e| e.into_inner());
                            c.admission().ephemeral_used_on(&sid, true, tick)
                        })
                        .sum();
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
