//! Scenario results: a table (printed and written as CSV) and line plots
//! (rendered to SVG by the `scenario` binary).

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
}
