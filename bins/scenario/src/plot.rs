//! SVG rendering of the scenarios' plots and bar charts.
//!
//! * Colours are keyed by series name (a hash into a fixed palette), so a
//!   series keeps its colour from run to run and from plot to plot; a
//!   model or paper series (`model …`, `paper …`) takes the colour of the
//!   simulated series it belongs to.
//! * The paper's reference points are drawn as hollow circles over the
//!   simulated lines.
//! * The legend sits beside the plotting area, never over the data.
//! * Axes whose values are all whole numbers are labelled as integers.
//! * On a logarithmic axis, points at or below zero cannot be drawn: they
//!   are left out and the legend says how many.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use sim::report::{BarChart, Plot, Series};

const WIDTH: u32 = 1040;
const HEIGHT: u32 = 560;
/// Width of the chart part; the legend gets the rest.
const CHART_WIDTH: u32 = 700;

/// A palette of distinguishable colours (Tableau-like).
const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 64, 0),
];

/// The part of a series name that decides its colour: without a `model `
/// or `paper ` prefix.
pub fn color_key(name: &str) -> &str {
    ["model ", "paper "].iter().fold(name, |k, pre| k.strip_prefix(pre).unwrap_or(k))
}

/// Reference series named `paper …` are the paper's printed numbers
/// (crosses); the others are model curves (hollow circles).
fn is_paper(name: &str) -> bool {
    name.starts_with("paper")
}

/// FNV-1a: a hash that does not change between runs or builds.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Colours for `names` (in order): the hashed palette slot of each name's
/// key; a key whose slot another key of the same plot took probes onwards.
pub fn colors(names: &[&str]) -> Vec<RGBColor> {
    let mut taken: Vec<(String, usize)> = Vec::new();
    names
        .iter()
        .map(|n| {
            let key = color_key(n);
            if let Some((_, slot)) = taken.iter().find(|(k, _)| k == key) {
                return PALETTE[*slot];
            }
            let mut slot = (fnv(key) % PALETTE.len() as u64) as usize;
            for _ in 0..PALETTE.len() {
                if !taken.iter().any(|(_, s)| *s == slot) {
                    break;
                }
                slot = (slot + 1) % PALETTE.len();
            }
            taken.push((key.to_string(), slot));
            PALETTE[slot]
        })
        .collect()
}

fn is_int(v: f64) -> bool {
    v.is_finite() && (v - v.round()).abs() < 1e-9
}

/// Tick label: on an integer axis only whole ticks are labelled (as
/// integers); otherwise up to 3 significant digits, very small or large
/// values in exponent form.
pub fn tick(v: f64, integer: bool) -> String {
    if integer {
        return if is_int(v) { format!("{:.0}", v) } else { String::new() };
    }
    if is_int(v) && v.abs() < 1e7 {
        return format!("{:.0}", v);
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-3..5).contains(&mag) {
        let s = format!("{v:.1e}");
        return s.replace(".0e", "e");
    }
    let d = (2 - mag).max(0) as usize;
    let s = format!("{v:.d$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The data range of a plot: (x0, x1, y0, y1, x all integers, y all
/// integers, points left out on a log axis).
struct Range {
    x: (f64, f64),
    y: (f64, f64),
    x_int: bool,
    y_int: bool,
    omitted: usize,
}

fn range<'a>(pts: impl Iterator<Item = &'a (f64, f64)>, log_y: bool) -> Range {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    let (mut x_int, mut y_int, mut omitted, mut any) = (true, true, 0, false);
    for &(x, y) in pts {
        if !x.is_finite() || !y.is_finite() || (log_y && y <= 0.0) {
            omitted += 1;
            continue;
        }
        any = true;
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
        x_int &= is_int(x);
        y_int &= is_int(y);
    }
    if !any {
        return Range {
            x: (0.0, 1.0),
            y: if log_y { (0.1, 10.0) } else { (0.0, 1.0) },
            x_int: false,
            y_int: false,
            omitted,
        };
    }
    // Integer x: half a step of room at both ends for the markers.
    let (x0, x1) = if x_int {
        (x0 - 0.3, x1 + 0.3)
    } else if x1 > x0 {
        let pad = (x1 - x0) * 0.02;
        (x0 - pad, x1 + pad)
    } else {
        (x0 - 1.0, x1 + 1.0)
    };
    let (y0, y1) = if log_y {
        (y0 / 2.0, (y1 * 2.0).max(y0 * 10.0))
    } else {
        let lo = y0.min(0.0);
        let hi = if y1 > lo { y1 + (y1 - lo) * 0.06 } else { lo + 1.0 };
        (lo, hi)
    };
    Range {
        x: (x0, x1),
        y: (y0, y1),
        x_int: x_int && x1 - x0 <= 40.0,
        y_int: y_int && !log_y,
        omitted,
    }
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("{e}")
}

/// One legend entry: a line sample, a hollow circle, a cross or a filled box.
enum Mark {
    Line,
    Marker,
    Cross,
    Box,
}

fn ref_mark(name: &str) -> Mark {
    if is_paper(name) {
        Mark::Cross
    } else {
        Mark::Marker
    }
}

fn legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    entries: &[(String, RGBColor, Mark)],
    footer: Option<String>,
) -> Result<()> {
    let font = ("sans-serif", 13).into_font();
    let mut y = 50;
    for (name, c, mark) in entries {
        let c = *c;
        match mark {
            Mark::Line => area
                .draw(&PathElement::new(vec![(8, y), (34, y)], c.stroke_width(2)))
                .map_err(err)?,
            Mark::Marker => area.draw(&Circle::new((21, y), 5, c.stroke_width(2))).map_err(err)?,
            Mark::Cross => area.draw(&Cross::new((21, y), 6, c.stroke_width(3))).map_err(err)?,
            Mark::Box => {
                area.draw(&Rectangle::new([(12, y - 6), (30, y + 6)], c.filled())).map_err(err)?
            }
        }
        let mut label: String = name.chars().take(44).collect();
        if name.chars().count() > 44 {
            label.push('…');
        }
        area.draw(&Text::new(label, (42, y - 7), font.clone())).map_err(err)?;
        y += 19;
    }
    if let Some(f) = footer {
        area.draw(&Text::new(f, (8, y + 6), ("sans-serif", 12).into_font().color(&BLACK.mix(0.7))))
            .map_err(err)?;
    }
    Ok(())
}

/// Draws a line plot with the paper's points `refs` overlaid.
pub fn draw_plot(plot: &Plot, refs: &[Series], path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (chart_area, legend_area) = root.split_horizontally(CHART_WIDTH);
    let all = plot.series.iter().chain(refs).flat_map(|s| s.points.iter());
    let r = range(all, plot.log_y);
    let names: Vec<&str> = plot.series.iter().chain(refs).map(|s| s.name.as_str()).collect();
    let cols = colors(&names);
    let (line_cols, ref_cols) = cols.split_at(plot.series.len());
    let keep = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!plot.log_y || y > 0.0);
    let mut builder = ChartBuilder::on(&chart_area);
    builder
        .caption(&plot.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70);
    let x_labels = if r.x_int { ((r.x.1 - r.x.0).round() as usize).max(2) } else { 10 };
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            let (xi, yi) = (r.x_int, r.y_int);
            chart
                .configure_mesh()
                .x_desc(plot.x_label.as_str())
                .y_desc(plot.y_label.as_str())
                .x_labels(x_labels)
                .x_label_formatter(&|x| tick(*x, xi))
                .y_label_formatter(&|y| tick(*y, yi))
                .draw()
                .map_err(err)?;
            for (s, c) in plot.series.iter().zip(line_cols) {
                let c = *c;
                // Break the line where a point cannot be drawn.
                let mut run: Vec<(f64, f64)> = Vec::new();
                let mut runs = Vec::new();
                for p in &s.points {
                    if keep(p) {
                        run.push(*p);
                    } else if !run.is_empty() {
                        runs.push(std::mem::take(&mut run));
                    }
                }
                runs.push(run);
                for run in runs {
                    chart
                        .draw_series(LineSeries::new(run.iter().copied(), c.stroke_width(2)))
                        .map_err(err)?;
                    chart
                        .draw_series(run.iter().map(|p| Circle::new(*p, 2, c.filled())))
                        .map_err(err)?;
                }
            }
            for (s, c) in refs.iter().zip(ref_cols) {
                let c = *c;
                let pts = s.points.iter().filter(|p| keep(p));
                if is_paper(&s.name) {
                    chart
                        .draw_series(pts.map(|p| Cross::new(*p, 7, c.stroke_width(3))))
                        .map_err(err)?;
                } else {
                    chart
                        .draw_series(pts.map(|p| Circle::new(*p, 6, c.stroke_width(2))))
                        .map_err(err)?;
                }
            }
        }};
    }
    if plot.log_y {
        body!(builder.build_cartesian_2d(r.x.0..r.x.1, (r.y.0..r.y.1).log_scale()).map_err(err)?);
    } else {
        body!(builder.build_cartesian_2d(r.x.0..r.x.1, r.y.0..r.y.1).map_err(err)?);
    }
    let mut entries: Vec<(String, RGBColor, Mark)> =
        plot.series.iter().zip(line_cols).map(|(s, c)| (s.name.clone(), *c, Mark::Line)).collect();
    entries.extend(refs.iter().zip(ref_cols).map(|(s, c)| (s.name.clone(), *c, ref_mark(&s.name))));
    let footer =
        (r.omitted > 0).then(|| format!("{} point(s) <= 0 not shown (log axis)", r.omitted));
    legend(&legend_area, &entries, footer)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Draws a grouped bar chart with the paper's values `refs` (x = category
/// index) as hollow circles.
pub fn draw_bars(b: &BarChart, refs: &[Series], path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (chart_area, legend_area) = root.split_horizontally(CHART_WIDTH);
    let n = b.categories.len().max(1);
    let vals = b
        .groups
        .iter()
        .flat_map(|g| g.1.iter().enumerate().map(|(i, v)| (i as f64, *v)))
        .chain(refs.iter().flat_map(|s| s.points.iter().copied()))
        .collect::<Vec<_>>();
    let r = range(vals.iter(), b.log_y);
    let (y0, y1) = if b.log_y { r.y } else { (r.y.0.min(0.0), r.y.1) };
    let names: Vec<&str> =
        b.groups.iter().map(|g| g.0.as_str()).chain(refs.iter().map(|s| s.name.as_str())).collect();
    let cols = colors(&names);
    let (bar_cols, ref_cols) = cols.split_at(b.groups.len());
    let mut builder = ChartBuilder::on(&chart_area);
    builder
        .caption(&b.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70);
    let width = 0.8 / b.groups.len().max(1) as f64;
    let ok = |v: f64| v.is_finite() && (!b.log_y || v > 0.0);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            let yi = r.y_int;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_desc(b.y_label.as_str())
                .y_label_formatter(&|y| tick(*y, yi))
                .draw()
                .map_err(err)?;
            for (gi, (g, c)) in b.groups.iter().zip(bar_cols).enumerate() {
                let c = *c;
                let bars = g.1.iter().enumerate().filter(|(_, v)| ok(**v)).map(|(i, v)| {
                    let x = i as f64 - 0.4 + gi as f64 * width;
                    Rectangle::new([(x, y0), (x + width * 0.95, *v)], c.filled())
                });
                chart.draw_series(bars).map_err(err)?;
            }
            for (s, c) in refs.iter().zip(ref_cols) {
                let c = *c;
                let pts = s.points.iter().filter(|p| ok(p.1));
                if is_paper(&s.name) {
                    chart
                        .draw_series(pts.map(|p| Cross::new(*p, 7, c.stroke_width(3))))
                        .map_err(err)?;
                } else {
                    chart
                        .draw_series(pts.map(|p| Circle::new(*p, 6, c.stroke_width(2))))
                        .map_err(err)?;
                }
            }
            // Category names under the axis, centred on their bars.
            let font = TextStyle::from(("sans-serif", 13).into_font())
                .pos(Pos::new(HPos::Center, VPos::Top));
            for (i, cat) in b.categories.iter().enumerate() {
                let (px, py) = chart.backend_coord(&(i as f64, y0));
                chart_area
                    .draw(&Text::new(cat.clone(), (px, py + 8), font.clone()))
                    .map_err(err)?;
            }
        }};
    }
    let xr = -0.5..(n as f64 - 0.5);
    if b.log_y {
        body!(builder.build_cartesian_2d(xr, (y0..y1).log_scale()).map_err(err)?);
    } else {
        body!(builder.build_cartesian_2d(xr, y0..y1).map_err(err)?);
    }
    let mut entries: Vec<(String, RGBColor, Mark)> =
        b.groups.iter().zip(bar_cols).map(|(g, c)| (g.0.clone(), *c, Mark::Box)).collect();
    entries.extend(refs.iter().zip(ref_cols).map(|(s, c)| (s.name.clone(), *c, ref_mark(&s.name))));
    let footer =
        (r.omitted > 0).then(|| format!("{} value(s) missing or <= 0 on a log axis", r.omitted));
    legend(&legend_area, &entries, footer)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_follow_the_name_not_the_order() {
        let a = colors(&["fifo, F = 2 Gbps", "zlane, F = 2 Gbps"]);
        let b = colors(&["zlane, F = 2 Gbps", "fifo, F = 2 Gbps"]);
        assert_eq!(a[1], b[0]);
        // A model series takes its simulated series' colour.
        let c = colors(&["zlane, F = 2 Gbps", "model zlane, F = 2 Gbps"]);
        assert_eq!(c[0], c[1]);
        // Distinct keys of one plot get distinct colours.
        let names: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let cs = colors(&refs);
        for i in 0..cs.len() {
            for j in 0..i {
                assert_ne!(cs[i], cs[j]);
            }
        }
        assert_eq!(color_key("paper trace 1 (1.63 Gbps)"), "trace 1 (1.63 Gbps)");
    }

    #[test]
    fn ticks() {
        assert_eq!(tick(3.0, true), "3");
        assert_eq!(tick(0.5, true), "");
        assert_eq!(tick(0.25, false), "0.25");
        assert_eq!(tick(1.5e-6, false), "1.5e-6");
        assert_eq!(tick(120.0, false), "120");
        assert_eq!(tick(150000.0, false), "150000");
        assert_eq!(tick(0.0, false), "0");
    }

    #[test]
    fn log_range_leaves_out_zeros_and_integer_x_is_detected() {
        let pts = [(1.0, 0.0), (2.0, 0.5), (3.0, 2e-6)];
        let r = range(pts.iter(), true);
        assert_eq!(r.omitted, 1);
        assert!(r.y.0 > 0.0 && r.y.0 <= 1e-6 && r.y.1 >= 0.5);
        assert!(r.x_int);
        let r = range([(0.5, 1.0)].iter(), false);
        assert!(!r.x_int && r.y.0 == 0.0);
    }

    #[test]
    fn draws_svg_files() {
        let dir = std::env::temp_dir().join(format!("scenario-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = Plot {
            name: "p".into(),
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_y: true,
            series: vec![Series {
                name: "a".into(),
                points: vec![(1.0, 1.0), (2.0, 0.0), (3.0, 0.1)],
            }],
        };
        let refs = [Series { name: "paper a".into(), points: vec![(1.0, 0.9)] }];
        draw_plot(&p, &refs, &dir.join("p.svg")).unwrap();
        let svg = std::fs::read_to_string(dir.join("p.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("not shown"));
        let b = BarChart {
            name: "b".into(),
            title: "t".into(),
            y_label: "y".into(),
            log_y: false,
            categories: vec!["R".into(), "N".into()],
            groups: vec![("in".into(), vec![1.0, 2.0]), ("out".into(), vec![1.0, f64::NAN])],
        };
        draw_bars(&b, &[], &dir.join("b.svg")).unwrap();
        let svg = std::fs::read_to_string(dir.join("b.svg")).unwrap();
        // Category names are drawn; the integer y axis has no "0" repeated
        // for fractional ticks.
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .map(|t| {
                let body = &t[t.find('>').unwrap() + 1..];
                body[..body.find("</text>").unwrap()].trim()
            })
            .collect();
        assert!(texts.contains(&"R") && texts.contains(&"N"), "{texts:?}");
        assert!(texts.iter().filter(|t| **t == "0").count() <= 1, "{texts:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
