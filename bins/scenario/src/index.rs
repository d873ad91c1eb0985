//! The index of `scenario all`: every scenario's plots beside the paper's
//! numbers, and one `paper | ours | relative error` table of all headline
//! rows, as Markdown and as HTML.

use sim::report::{headline_cells, Report};

/// One scenario's part of the index.
pub struct Section {
    /// Scenario name.
    pub name: String,
    /// What it reproduces.
    pub what: String,
    /// The parameter file.
    pub config: String,
    /// Wall-clock seconds it took.
    pub secs: f64,
    /// The report and its SVG files, or why the run failed.
    pub result: Result<(Report, Vec<String>), String>,
}

const HEADLINE_COLS: [&str; 7] =
    ["metric", "paper", "ours", "rel. error", "tolerance", "within", "source of the paper value"];

fn counts(sections: &[Section]) -> (usize, usize) {
    let rows = sections.iter().filter_map(|s| s.result.as_ref().ok()).flat_map(|r| &r.0.headlines);
    rows.fold((0, 0), |(n, ok), h| (n + 1, ok + usize::from(h.pass())))
}

fn mode(quick: bool) -> &'static str {
    if quick {
        "quick mode (short runs, reduced scale: numbers are noisier than at the defaults)"
    } else {
        "default parameters (config/scenarios/*.toml)"
    }
}

/// Markdown cell: no pipes or line breaks.
fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown index.
pub fn markdown(sections: &[Section], quick: bool) -> String {
    let mut o = String::new();
    let (n, ok) = counts(sections);
    o.push_str("# Scenario report: paper vs simulation\n\n");
    o.push_str(&format!(
        "Run: {}. Headline numbers within tolerance: {ok} of {n}.\n\n",
        mode(quick)
    ));
    o.push_str("## Headline numbers\n\n| scenario | ");
    o.push_str(&HEADLINE_COLS.join(" | "));
    o.push_str(" |\n|");
    o.push_str(&"---|".repeat(HEADLINE_COLS.len() + 1));
    o.push('\n');
    for s in sections {
        match &s.result {
            Ok((r, _)) => {
                for h in &r.headlines {
                    let mut cells = headline_cells(h);
                    cells.push(h.note.clone());
                    o.push_str(&format!("| {} | ", s.name));
                    o.push_str(&cells.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | "));
                    o.push_str(" |\n");
                }
            }
            Err(e) => o.push_str(&format!("| {} | run failed: {} |||||||\n", s.name, md(e))),
        }
    }
    for s in sections {
        o.push_str(&format!("\n## {}\n\n{}\n\n", s.name, s.what));
        o.push_str(&format!("Parameters: `{}`; {:.1} s.\n\n", s.config, s.secs));
        match &s.result {
            Err(e) => o.push_str(&format!("**Run failed:** {}\n", md(e))),
            Ok((r, files)) => {
                for f in files {
                    o.push_str(&format!("![{f}]({f})\n\n"));
                }
                o.push_str("```text\n");
                o.push_str(&r.table());
                o.push_str("\n```\n");
            }
        }
    }
    o
}

/// HTML text.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The HTML index (one self-contained page; the SVGs beside it).
pub fn html(sections: &[Section], quick: bool) -> String {
    let mut o = String::new();
    let (n, ok) = counts(sections);
    o.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <title>Scenario report: paper vs simulation</title>\n<style>\n\
         body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}\n\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px}\n\
         td.num{text-align:right;font-variant-numeric:tabular-nums}\n\
         tr.fail td{background:#fde2e2}tr.pass td.ok{background:#e2f5e2}\n\
         img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}pre{background:#f6f6f6;padding:0.5em;overflow-x:auto}\n\
         </style></head><body>\n<h1>Scenario report: paper vs simulation</h1>\n",
    );
    o.push_str(&format!(
        "<p>Run: {}. Headline numbers within tolerance: <b>{ok} of {n}</b>.</p>\n",
        esc(mode(quick))
    ));
    o.push_str("<h2>Headline numbers</h2>\n<table><tr><th>scenario</th>");
    for c in HEADLINE_COLS {
        o.push_str(&format!("<th>{}</th>", esc(c)));
    }
    o.push_str("</tr>\n");
    for s in sections {
        match &s.result {
            Ok((r, _)) => {
                for h in &r.headlines {
                    let cells = headline_cells(h);
                    let class = if h.pass() { "pass" } else { "fail" };
                    o.push_str(&format!(
                        "<tr class=\"{class}\"><td><a href=\"#{0}\">{0}</a></td><td>{1}</td>",
                        esc(&s.name),
                        esc(&cells[0])
                    ));
                    for c in &cells[1..5] {
                        o.push_str(&format!("<td class=\"num\">{}</td>", esc(c)));
                    }
                    o.push_str(&format!(
                        "<td class=\"ok\">{}</td><td>{}</td></tr>\n",
                        esc(&cells[5]),
                        esc(&h.note)
                    ));
                }
            }
            Err(e) => o.push_str(&format!(
                "<tr class=\"fail\"><td>{}</td><td colspan=\"7\">run failed: {}</td></tr>\n",
                esc(&s.name),
                esc(e)
            )),
        }
    }
    o.push_str("</table>\n");
    for s in sections {
        o.push_str(&format!(
            "<h2 id=\"{0}\">{0}</h2>\n<p>{1}</p>\n<p>Parameters: <code>{2}</code>; {3:.1} s.</p>\n",
            esc(&s.name),
            esc(&s.what),
            esc(&s.config),
            s.secs
        ));
        match &s.result {
            Err(e) => o.push_str(&format!("<p><b>Run failed:</b> {}</p>\n", esc(e))),
            Ok((r, files)) => {
                if !r.headlines.is_empty() {
                    o.push_str("<table><tr>");
                    for c in &HEADLINE_COLS[..6] {
                        o.push_str(&format!("<th>{}</th>", esc(c)));
                    }
                    o.push_str("</tr>\n");
                    for h in &r.headlines {
                        let cells = headline_cells(h);
                        let class = if h.pass() { "pass" } else { "fail" };
                        o.push_str(&format!("<tr class=\"{class}\"><td>{}</td>", esc(&cells[0])));
                        for c in &cells[1..5] {
                            o.push_str(&format!("<td class=\"num\">{}</td>", esc(c)));
                        }
                        o.push_str(&format!("<td class=\"ok\">{}</td></tr>\n", esc(&cells[5])));
                    }
                    o.push_str("</table>\n");
                }
                for f in files {
                    o.push_str(&format!("<img src=\"{0}\" alt=\"{0}\">\n", esc(f)));
                }
                o.push_str(&format!("<pre>{}</pre>\n", esc(&r.table())));
            }
        }
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::report::Headline;

    fn sections() -> Vec<Section> {
        let mut r = Report::new("x", &["a"]);
        r.row(vec!["<1>".into()]);
        r.headlines.push(Headline::rel("m|1", 2.0, 2.05, 0.05).note("paper p. 3"));
        r.headlines.push(Headline::at_least("m2", 30.0, 3.0));
        vec![
            Section {
                name: "x".into(),
                what: "w".into(),
                config: "c.toml".into(),
                secs: 1.0,
                result: Ok((r, vec!["x.svg".into()])),
            },
            Section {
                name: "y".into(),
                what: "w".into(),
                config: "y.toml".into(),
                secs: 0.0,
                result: Err("bad <param>".into()),
            },
        ]
    }

    #[test]
    fn markdown_has_the_table_and_the_plots() {
        let m = markdown(&sections(), true);
        assert!(m.contains("within tolerance: 1 of 2"), "{m}");
        assert!(m.contains("| x | m\\|1 | 2 | 2.050 | +2.5 % | ±5 % | yes | paper p. 3 |"), "{m}");
        assert!(m.contains("![x.svg](x.svg)"));
        assert!(m.contains("run failed: bad <param>"));
    }

    #[test]
    fn html_escapes_and_marks_failures() {
        let h = html(&sections(), false);
        assert!(h.contains("&lt;1&gt;") && h.contains("bad &lt;param&gt;"));
        assert!(h.contains("<img src=\"x.svg\""));
        assert!(h.contains("class=\"fail\"") && h.contains("class=\"pass\""));
        assert!(!h.contains("<1>"));
    }
}
