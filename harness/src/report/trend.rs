//! Nightly trends as a table and an HTML page (one SVG per series, see
//! [`super::svg::trend`]). Plain data in, text out: the history module
//! fills these types, so `report/` never reads the database.

use anyhow::{Context, Result};
use comfy_table::{presets, ContentArrangement, Table};
use serde::Serialize;

use super::num;

/// One night of a trend.
#[derive(Debug, Clone, Serialize)]
pub struct TrendPoint {
    /// Date of the run (`YYYY-MM-DD`).
    pub date: String,
    /// Run id.
    pub run_id: String,
    /// Link to the run's report (relative to the page, or `file://`).
    pub link: String,
    /// Median of the boot values.
    pub y: f64,
    /// Interval low.
    pub lo: f64,
    /// Interval high.
    pub hi: f64,
    /// The interval is a 95% CI (else the range of too few boots).
    pub ci: bool,
    /// Boots.
    pub n: usize,
}

/// A change point: before the night at `index`.
#[derive(Debug, Clone, Serialize)]
pub struct TrendMark {
    /// Index of the first night after the change.
    pub index: usize,
    /// The change in words (date, size, significance, runs on either side).
    pub text: String,
}

/// One series drawn.
#[derive(Debug, Clone, Serialize)]
pub struct Trend {
    /// Benchmark, metric, vCPUs and variant.
    pub title: String,
    /// What keeps the series apart: matrix, profile, host, clock, accelerator.
    pub key: String,
    /// Unit (with direction).
    pub unit: String,
    /// Nights, oldest first.
    pub points: Vec<TrendPoint>,
    /// Change points.
    pub marks: Vec<TrendMark>,
}

/// The trends as text: per series a heading, its nights and its changes.
pub fn table(trends: &[Trend]) -> String {
    let mut out = String::new();
    for t in trends {
        out.push_str(&format!("{} — {}\n", t.title, t.key));
        let mut tab = Table::new();
        tab.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
        tab.set_header(vec!["night".to_string(), "run".into(), format!("median [interval] ({})", t.unit), "boots".into(), "change".into()]);
        for (i, p) in t.points.iter().enumerate() {
            let interval = if p.ci { format!("[{}, {}]", num(p.lo), num(p.hi)) } else { format!("range [{}, {}]", num(p.lo), num(p.hi)) };
            let mark = t.marks.iter().filter(|m| m.index == i).map(|m| m.text.clone()).collect::<Vec<_>>().join("; ");
            tab.add_row(vec![p.date.clone(), p.run_id.clone(), format!("{} {interval}", num(p.y)), p.n.to_string(), mark]);
        }
        out.push_str(&format!("{tab}\n"));
        if t.marks.is_empty() {
            out.push_str(&format!("no change point over {} night(s)\n", t.points.len()));
        }
        out.push('\n');
    }
    out
}

#[derive(Serialize)]
struct Drawn<'a> {
    t: &'a Trend,
    svg: String,
}

/// The trends as a self-contained HTML page; `method` states how change
/// points were found.
pub fn render(trends: &[Trend], method: &str) -> Result<String> {
    let drawn: Vec<Drawn> = trends.iter().map(|t| Drawn { t, svg: super::svg::trend(t) }).collect();
    let mut env = minijinja::Environment::new();
    env.add_template("history.html", include_str!("history.html")).context("load the history template")?;
    let ctx = minijinja::context! {
        trends => minijinja::Value::from(minijinja::value::Serde(&drawn)),
        method => method,
    };
    env.get_template("history.html")?.render(ctx).context("render the history page")
}
