//! Scenario results: a table (printed and written as CSV), line plots and
//! bar charts (rendered to SVG by the `scenario` binary), the paper's
//! reference points to overlay on them, and **headline rows** comparing the
//! paper's numbers with ours.
//!
//! # Headline rows
//! Every scenario contributes rows `{metric, paper, ours, relative error,
//! tolerance}` as [`Headline`]s, pushed into [`Report::headlines`]. A
//! scenario's runner can push them itself; results that do not (yet) do so
//! implement [`Headlines`] here, and the `scenario` binary adds those rows.
//! A row is judged by its [`Check`]: a relative tolerance around the paper's
//! value, or a bound where the paper states one ("below 2 %", "at least 30×").

/// One line of a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// A line plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Plot {
    /// File stem and title.
    pub name: String,
    /// Title shown above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic Y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// A grouped bar chart (e.g. a table of the paper drawn as a figure).
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// File stem.
    pub name: String,
    /// Title shown above the chart.
    pub title: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic Y axis (non-positive bars are left out).
    pub log_y: bool,
    /// Category labels along the X axis.
    pub categories: Vec<String>,
    /// One bar per category and group: (group name, value per category;
    /// `NaN` = no bar).
    pub groups: Vec<(String, Vec<f64>)>,
}

/// Paper values to overlay on the plot named `plot` (drawn as markers).
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// [`Plot::name`] or [`BarChart::name`] of the plot it belongs to.
    pub plot: String,
    /// The paper's points (for a bar chart: x = category index, 0-based).
    pub series: Series,
}

/// How a headline number is judged against the paper's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// `|ours / paper − 1| <= tol`.
    Rel(f64),
    /// The paper states a lower bound: `ours >= paper`.
    AtLeast,
    /// The paper states an upper bound: `ours <= paper`.
    AtMost,
}

/// One headline number: the paper's value beside ours.
#[derive(Clone, Debug, PartialEq)]
pub struct Headline {
    /// What is compared, with its unit.
    pub metric: String,
    /// The paper's value (or bound).
    pub paper: f64,
    /// Ours.
    pub ours: f64,
    /// How the two are compared.
    pub check: Check,
    /// Where the paper's value comes from, or a caveat.
    pub note: String,
}

impl Headline {
    /// A row judged by relative error `tol`.
    pub fn rel(metric: &str, paper: f64, ours: f64, tol: f64) -> Self {
        Headline { metric: metric.into(), paper, ours, check: Check::Rel(tol), note: String::new() }
    }

    /// A row where the paper states a lower bound.
    pub fn at_least(metric: &str, paper: f64, ours: f64) -> Self {
        Headline { metric: metric.into(), paper, ours, check: Check::AtLeast, note: String::new() }
    }

    /// A row where the paper states an upper bound.
    pub fn at_most(metric: &str, paper: f64, ours: f64) -> Self {
        Headline { metric: metric.into(), paper, ours, check: Check::AtMost, note: String::new() }
    }

    /// With a note on the paper's value.
    pub fn note(mut self, note: &str) -> Self {
        self.note = note.into();
        self
    }

    /// `ours / paper − 1` (NaN if the paper's value is 0).
    pub fn rel_error(&self) -> f64 {
        if self.paper == 0.0 {
            if self.ours == 0.0 {
                0.0
            } else {
                f64::NAN
            }
        } else {
            self.ours / self.paper - 1.0
        }
    }

    /// The tolerance as text (`±5 %`, `≥ paper`, `≤ paper`).
    pub fn tolerance(&self) -> String {
        match self.check {
            Check::Rel(t) => format!("±{}", fmt_pct(t)),
            Check::AtLeast => "≥ paper".into(),
            Check::AtMost => "≤ paper".into(),
        }
    }

    /// Whether ours is within the tolerance (false for NaN).
    pub fn pass(&self) -> bool {
        match self.check {
            Check::Rel(t) => {
                if self.paper == 0.0 {
                    self.ours.abs() <= t
                } else {
                    self.rel_error().abs() <= t
                }
            }
            Check::AtLeast => self.ours >= self.paper,
            Check::AtMost => self.ours <= self.paper,
        }
    }
}

/// A percentage with up to 2 decimals and no trailing zeros (`0.05` → `5 %`).
fn fmt_pct(x: f64) -> String {
    let s = format!("{:.2}", x * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} %")
}

/// A number with 4 significant digits, without exponent for ordinary sizes.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == x.round() && x.abs() < 1e6 {
        return format!("{x:.0}");
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-4..6).contains(&mag) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - mag).max(0) as usize;
    format!("{x:.decimals$}")
}

/// Results that yield headline rows (and the paper's points for their plots).
pub trait Headlines {
    /// The rows, paper beside ours.
    fn headlines(&self) -> Vec<Headline>;

    /// The paper's points to overlay on the scenario's plots.
    fn references(&self) -> Vec<Reference> {
        Vec::new()
    }
}

impl Headlines for [crate::scenarios::flowpolice::Fig53Run] {
    /// Thesis Figs. 5.3/5.4: complying attackers get at most their
    /// per-sender fair share; non-complying ones almost nothing, and the
    /// legitimate senders almost their desired throughput.
    fn headlines(&self) -> Vec<Headline> {
        use crate::scenarios::flowpolice::Strategy;
        let mut h = Vec::new();
        for r in self {
            let s = format!("{:?}", r.strategy);
            let case = format!("Fig. 5.2 case ({})", r.topology.name());
            match r.strategy {
                Strategy::NonComplying => {
                    h.push(
                        Headline::at_most(
                            "FlowPolice non-complying: attackers' share of the link",
                            0.05,
                            r.attack_share,
                        )
                        .note(&format!(
                            "thesis Fig. 5.3: reduced to almost zero (bound: 5 %); {case}"
                        )),
                    );
                    // Fig. 5.4 shows where the legitimate throughput
                    // settles; the average from the first period on (the
                    // table's `legit_vs_desired`) also holds the transient
                    // of Algorithm 1's first periods.
                    let settled = match r.convergence_s {
                        Some(t) => format!("attackers settled after {t:.0} s"),
                        None => "attackers did not settle".into(),
                    };
                    h.push(
                        Headline::rel(
                            "FlowPolice non-complying: legit throughput / desired, last quarter",
                            1.0,
                            r.final_legit_ratio,
                            0.05,
                        )
                        .note(&format!(
                            "thesis Fig. 5.4: almost their desired throughput; {settled}; \
                             {:.2} averaged from the first period on; {case}",
                            r.legit_ratio
                        )),
                    );
                }
                _ => h.push(
                    Headline::at_most(
                        &format!("FlowPolice {s}: attackers' share / their fair share"),
                        1.0,
                        if r.attack_fair_share > 0.0 {
                            r.attack_share / r.attack_fair_share
                        } else {
                            f64::NAN
                        },
                    )
                    .note(&format!("thesis §3.6.4: at most the per-sender fair share; {case}")),
                ),
            }
        }
        h
    }
}

impl Headlines for [crate::scenarios::flowpolice_fct::FctRun] {
    /// Thesis §5.2.3: FCT ~1.3× under attack with FlowPolice; without it
    /// transfers do not finish.
    fn headlines(&self) -> Vec<Headline> {
        use crate::scenarios::flowpolice_fct::Setting;
        let get = |s: Setting| self.iter().find(|r| r.setting == s);
        let mut h = Vec::new();
        if let (Some(base), Some(fp)) = (get(Setting::NoAttack), get(Setting::Flowpolice)) {
            h.push(
                Headline::rel(
                    "FlowPolice: mean FCT under attack / without",
                    1.3,
                    fp.mean() / base.mean(),
                    0.05,
                )
                .note("thesis Fig. 5.5: ~1.3x (1.28-1.37x over seeds 1-20)"),
            );
        }
        if let Some(r) = get(Setting::NoFlowpolice) {
            let total = f64::from(r.trials).max(r.completed() as f64).max(1.0);
            h.push(
                Headline::rel(
                    "no FlowPolice: transfers unfinished (fraction)",
                    1.0,
                    1.0 - r.completed() as f64 / total,
                    0.05,
                )
                .note("thesis: the transfer cannot be finished during attacks"),
            );
        }
        h
    }
}

impl Headlines for [crate::scenarios::sibra::Fig7Point] {
    /// SIBRA Figs. 7/8(a): legitimate requests keep succeeding and the
    /// reservable bandwidth does not shrink with the number of attackers.
    fn headlines(&self) -> Vec<Headline> {
        let mut h = Vec::new();
        let (Some(first), Some(last)) = (self.first(), self.last()) else { return h };
        if last.legit_sent > 0 {
            h.push(
                Headline::rel(
                    &format!("SIBRA: legit request success at {} attackers", last.attackers),
                    1.0,
                    last.legit_delivered as f64 / last.legit_sent as f64,
                    0.05,
                )
                .note("paper Fig. 7: SIBRA's success rate stays at 100 %"),
            );
        }
        if first.legit_reservable_bps > 0 {
            h.push(
                Headline::rel(
                    "SIBRA: reservable bandwidth, most / fewest attackers",
                    1.0,
                    last.legit_reservable_bps as f64 / first.legit_reservable_bps as f64,
                    0.05,
                )
                .note("paper Fig. 8(a): the fair share is not affected by the number of attackers"),
            );
        }
        h
    }

    fn references(&self) -> Vec<Reference> {
        // Fig. 7: SIBRA's legitimate requests all succeed at every count.
        let points = self.iter().map(|p| (f64::from(p.attackers), 1.0)).collect();
        vec![Reference {
            plot: "sibra_fig7_success".into(),
            series: Series { name: "paper SIBRA (legitimate)".into(), points },
        }]
    }
}

/// SIBRA Fig. 8(b)'s curve: (loss rate, waste rate) points.
pub struct Fig8bCurve<'a>(pub &'a [(f64, f64)]);

impl Headlines for Fig8bCurve<'_> {
    /// The paper: at 5 % loss the waste is no more than 1.4 %.
    fn headlines(&self) -> Vec<Headline> {
        let pts = self.0;
        let at = |x: f64| -> Option<f64> {
            let i = pts.iter().position(|p| p.0 >= x)?;
            if i == 0 {
                return (pts[0].0 == x).then_some(pts[0].1);
            }
            let (a, b) = (pts[i - 1], pts[i]);
            Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
        };
        match at(0.05) {
            Some(w) => vec![Headline::at_most("SIBRA: waste rate at 5 % loss", 0.014, w)
                .note("paper Fig. 8(b): no more than 1.4 %")],
            None => Vec::new(),
        }
    }

    fn references(&self) -> Vec<Reference> {
        vec![Reference {
            plot: "sibra_fig8b_waste".into(),
            series: Series { name: "paper r_waste".into(), points: vec![(0.05, 0.014)] },
        }]
    }
}

/// What a scenario produces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Scenario name.
    pub name: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows (same length as `columns`).
    pub rows: Vec<Vec<String>>,
    /// Plots.
    pub plots: Vec<Plot>,
    /// Notes printed under the table (scaling, checks).
    pub notes: Vec<String>,
    /// Bar charts.
    pub bars: Vec<BarChart>,
    /// Paper points to overlay on the plots and bar charts.
    pub references: Vec<Reference>,
    /// Paper vs ours, per headline number.
    pub headlines: Vec<Headline>,
}

impl Report {
    /// An empty report with `columns`.
    pub fn new(name: &str, columns: &[&str]) -> Self {
        Report {
            name: name.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as aligned text.
    pub fn table(&self) -> String {
        let mut w: Vec<usize> = self.columns.iter().map(String::len).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < w.len() {
                    w[i] = w[i].max(c.len());
                }
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                let width = w.get(i).copied().unwrap_or(0);
                s.push_str(&format!("{c:>width$}  "));
            }
            s.trim_end().to_string()
        };
        let mut out = line(&self.columns);
        out.push('\n');
        out.push_str(&"-".repeat(w.iter().map(|x| x + 2).sum::<usize>().saturating_sub(2)));
        for r in &self.rows {
            out.push('\n');
            out.push_str(&line(r));
        }
        for n in &self.notes {
            out.push_str("\n# ");
            out.push_str(n);
        }
        out
    }

    /// The headline rows as aligned text (`metric | paper | ours | rel. error
    /// | tolerance | ok`).
    pub fn headline_table(&self) -> String {
        let mut t =
            Report::new(&self.name, &["metric", "paper", "ours", "rel_error", "tolerance", "ok"]);
        for h in &self.headlines {
            t.row(headline_cells(h));
        }
        t.table()
    }

    /// The paper's reference series for the plot `plot`.
    pub fn references_for<'a>(&'a self, plot: &'a str) -> impl Iterator<Item = &'a Series> + 'a {
        self.references.iter().filter(move |r| r.plot == plot).map(|r| &r.series)
    }

    /// The table as CSV (cells containing commas or quotes are quoted).
    pub fn csv(&self) -> String {
        let esc = |c: &String| {
            if c.contains([',', '"', '\n']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.clone()
            }
        };
        let mut out = self.columns.iter().map(esc).collect::<Vec<_>>().join(",");
        for r in &self.rows {
            out.push('\n');
            out.push_str(&r.iter().map(esc).collect::<Vec<_>>().join(","));
        }
        out.push('\n');
        out
    }
}

/// The cells of a headline row: metric, paper, ours, relative error,
/// tolerance, `yes`/`NO`.
pub fn headline_cells(h: &Headline) -> Vec<String> {
    let err = h.rel_error();
    vec![
        h.metric.clone(),
        fmt_num(h.paper),
        fmt_num(h.ours),
        if err.is_finite() { format!("{:+.1} %", err * 100.0) } else { "-".into() },
        h.tolerance(),
        if h.pass() { "yes".into() } else { "NO".into() },
    ]
}

/// Formats a rate in bit/s with 4 significant digits in the given unit.
pub fn fmt_rate(bps: f64, unit: f64) -> String {
    format!("{:.4}", bps / unit)
}

/// Progress on stderr: `\r[label] 42%`, one line per run.
pub fn stderr_progress(label: String) -> crate::net::ProgressFn {
    Box::new(move |f: f64| {
        use std::io::Write;
        let mut e = std::io::stderr();
        let _ = write!(e, "\r[{label}] {:3.0}%", f * 100.0);
        if f >= 1.0 {
            let _ = writeln!(e);
        }
        let _ = e.flush();
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_csv() {
        let mut r = Report::new("x", &["a", "bb"]);
        r.row(vec!["1".into(), "x,y".into()]);
        assert_eq!(r.csv(), "a,bb\n1,\"x,y\"\n");
        assert!(r.table().contains("bb"));
    }

    #[test]
    fn headline_checks() {
        let h = Headline::rel("x", 1.71, 1.75, 0.05);
        assert!(h.pass());
        assert!((h.rel_error() - 0.0234).abs() < 1e-3);
        assert!(!Headline::rel("x", 1.0, 1.2, 0.05).pass());
        assert!(Headline::at_least("x", 30.0, 31.0).pass());
        assert!(!Headline::at_least("x", 30.0, f64::NAN).pass());
        assert!(Headline::at_most("x", 2.0, 1.9).pass());
        assert!(Headline::rel("x", 0.0, 0.0, 0.0).pass());
        assert_eq!(Headline::rel("x", 1.0, 1.0, 0.05).tolerance(), "±5 %");
        let mut r = Report::new("s", &["a"]);
        r.headlines.push(Headline::at_most("overhead [%]", 2.0, 1.7));
        let t = r.headline_table();
        assert!(t.contains("overhead [%]") && t.contains("yes"), "{t}");
        assert_eq!(fmt_num(0.000123456), "0.0001235");
        assert_eq!(fmt_num(1234.56), "1235");
        assert_eq!(fmt_num(4.0), "4");
        assert_eq!(fmt_num(1.5e-7), "1.500e-7");
    }
}
