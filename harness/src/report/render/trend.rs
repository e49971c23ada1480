//! Nightly trends as a table and an HTML page (one SVG per series, see
//! [`svg`]). Plain data in, text out: the history module
//! fills these types, so `report/` never reads the database.

use anyhow::{Context, Result};
use comfy_table::{presets, ContentArrangement, Table};
use serde::Serialize;

use crate::report::num;
use crate::ui::printable;

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

/// The trends as text: per series a heading, its nights and its changes
/// (what the runs say escaped: [`crate::ui::printable`]).
pub fn table(trends: &[Trend]) -> String {
    let mut out = String::new();
    for t in trends {
        out.push_str(&format!("{} — {}\n", printable(&t.title), printable(&t.key)));
        let mut tab = Table::new();
        tab.load_style(presets::UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(super::compact::terminal_width().min(u16::MAX as usize) as u16);
        tab.set_header(vec![
            "night".to_string(),
            "run".into(),
            format!("median [interval] ({})", printable(&t.unit)),
            "boots".into(),
            "change".into(),
        ]);
        for (i, p) in t.points.iter().enumerate() {
            let interval = if p.ci {
                format!("[{}, {}]", num(p.lo), num(p.hi))
            } else {
                format!("range [{}, {}]", num(p.lo), num(p.hi))
            };
            let mark = t
                .marks
                .iter()
                .filter(|m| m.index == i)
                .map(|m| m.text.clone())
                .collect::<Vec<_>>()
                .join("; ");
            tab.add_row(vec![
                printable(&p.date),
                printable(&p.run_id),
                format!("{} {interval}", num(p.y)),
                p.n.to_string(),
                printable(&mark),
            ]);
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
    let drawn: Vec<Drawn> = trends.iter().map(|t| Drawn { t, svg: svg(t) }).collect();
    let mut env = minijinja::Environment::new();
    env.add_template("history.html", include_str!("history.html"))
        .context("load the history template")?;
    let ctx = minijinja::context! {
        trends => minijinja::Value::from(minijinja::value::Serde(&drawn)),
        method => method,
    };
    env.get_template("history.html")?
        .render(ctx)
        .context("render the history page")
}

/// A nightly trend: one point per night with its interval bar, each point a
/// link to `link`, a dashed vertical line before each change's first night.
pub fn svg(t: &Trend) -> String {
    use super::svg::{esc, fmt, frame, B, H, L, R, T, W};
    use std::fmt::Write;
    let (ylo, yhi) = y_range(t);
    let mut out = String::new();
    frame(&mut out, ylo, yhi, &t.unit);
    let n = t.points.len().max(2) as f64;
    let px = |i: f64| -> f64 { L + 10.0 + (W - L - R - 20.0) * i / (n - 1.0) };
    let py = |y: f64| -> f64 { H - B - (H - T - B) * ((y - ylo) / (yhi - ylo)) };
    let line: Vec<String> = t
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{:.1},{:.1}", px(i as f64), py(p.y)))
        .collect();
    let _ = write!(
        out,
        r##"<polyline class="trend" points="{}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>"##,
        line.join(" ")
    );
    for (i, p) in t.points.iter().enumerate() {
        let x = px(i as f64);
        let dash = if p.ci { "" } else { r#" stroke-dasharray="2 2""# };
        let _ = write!(
            out,
            r##"<line class="interval" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="#1f77b4"{dash}/><a href="{}"><circle cx="{x:.1}" cy="{:.1}" r="3.5" fill="#1f77b4"><title>{} {}: {} [{}, {}], {} boots</title></circle></a>"##,
            py(p.lo),
            py(p.hi),
            esc(&p.link),
            py(p.y),
            esc(&p.date),
            esc(&p.run_id),
            fmt(p.y),
            fmt(p.lo),
            fmt(p.hi),
            p.n
        );
    }
    for m in &t.marks {
        let x = px(m.index as f64 - 0.5);
        let _ = write!(
            out,
            r##"<line class="change" x1="{x:.1}" x2="{x:.1}" y1="{T}" y2="{}" stroke="#d62728" stroke-dasharray="5 3"><title>{}</title></line>"##,
            H - B,
            esc(&m.text)
        );
    }
    x_labels(&mut out, t, &px);
    out.push_str("</svg>");
    out
}

/// A trend's y range: its intervals with a margin of 8% (5% of the value
/// either side when they are one point).
fn y_range(t: &Trend) -> (f64, f64) {
    let (mut ylo, mut yhi) = t.points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.lo), b.max(p.hi))
    });
    if !ylo.is_finite() {
        (ylo, yhi) = (0.0, 1.0);
    } else if yhi <= ylo {
        let d = ylo.abs().max(1.0) * 0.05;
        (ylo, yhi) = (ylo - d, yhi + d);
    }
    let pad = (yhi - ylo) * 0.08;
    (ylo - pad, yhi + pad)
}

/// The first and last nights' dates under a trend's x axis, and its title.
fn x_labels(out: &mut String, t: &Trend, px: &dyn Fn(f64) -> f64) {
    use super::svg::{esc, B, H, L, R, W};
    use std::fmt::Write;
    let label = |i: usize| t.points.get(i).map(|p| esc(&p.date)).unwrap_or_default();
    let last = t.points.len().saturating_sub(1);
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{}" text-anchor="start">{}</text><text x="{:.1}" y="{}" text-anchor="end">{}</text>"#,
        px(0.0),
        H - B + 16.0,
        label(0),
        px(last as f64),
        H - B + 16.0,
        label(last)
    );
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">night (run)</text>"#,
        (L + W - R) / 2.0,
        H - 6.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trend_links_every_night_and_marks_changes() {
        let points = (0..6)
            .map(|i| TrendPoint {
                date: format!("2026-01-0{}", i + 1),
                run_id: format!("r{i}"),
                link: format!("../r{i}/report.html"),
                y: if i < 3 { 10.0 } else { 11.0 },
                lo: 9.5,
                hi: 11.5,
                ci: i != 0,
                n: 5,
            })
            .collect();
        let t = Trend {
            title: "t".into(),
            key: "k".into(),
            unit: "ms".into(),
            points,
            marks: vec![TrendMark {
                index: 3,
                text: "+10%".into(),
            }],
        };
        let s = svg(&t);
        assert_eq!(s.matches("<a href=").count(), 6);
        assert!(s.contains(r#"href="../r3/report.html""#));
        assert_eq!(s.matches(r#"class="change""#).count(), 1);
        assert_eq!(
            s.matches("stroke-dasharray=\"2 2\"").count(),
            1,
            "the first night had too few boots for a CI"
        );
    }

    #[test]
    fn the_history_table_escapes_what_the_runs_say() {
        let p = TrendPoint {
            date: "2026-01-01".into(),
            run_id: "r\u{1b}]0;owned\u{7}".into(),
            link: String::new(),
            y: 1.0,
            lo: 1.0,
            hi: 1.0,
            ci: false,
            n: 1,
        };
        let t = Trend {
            title: "t\u{1b}[1m".into(),
            key: "host \u{9b}x".into(),
            unit: "ms".into(),
            points: vec![p],
            marks: vec![],
        };
        let out = table(&[t]);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    }
}
