//! The HTML report: a minijinja template rendered from a serialisable
//! context (the [`Report`] plus SVG plots), so tests can check the context
//! and the page alike.

use anyhow::{Context, Result};
use serde::Serialize;

use super::svg::{self, Point};
use super::{cell_text, num, Cell, Report, Row};
use crate::stats::Verdict;

#[derive(Serialize)]
struct HtmlCell {
    text: String,
    class: &'static str,
}

#[derive(Serialize)]
struct HtmlRow<'a> {
    benchmark: &'a str,
    metric: &'a str,
    unit: &'a str,
    higher_is_better: bool,
    vcpus: u32,
    cells: Vec<HtmlCell>,
}

#[derive(Serialize)]
struct Strip {
    vcpus: u32,
    svg: String,
}

#[derive(Serialize)]
struct Plot {
    benchmark: String,
    metric: String,
    scaling: String,
    strips: Vec<Strip>,
}

/// The CSS class of a cell: its verdict, or `failed` when it has no value.
fn class_of(c: &Cell) -> &'static str {
    if c.summary.is_none() && c.failure.is_some() {
        return "failed";
    }
    match c.decision.as_ref().map(|d| d.verdict) {
        Some(Verdict::Regressed) => "regressed",
        Some(Verdict::Improved) => "improved",
        Some(Verdict::Small) => "small",
        Some(Verdict::Unsure) => "unsure",
        Some(Verdict::FailsMore) => "failsmore",
        Some(Verdict::WorkDiffers) => "workdiffers",
        _ => "",
    }
}

/// Renders the report as a self-contained HTML page.
pub fn render(r: &Report) -> Result<String> {
    let rows: Vec<HtmlRow> = r.rows.iter().map(|row| html_row(r, row)).collect();
    let mut plots: Vec<Plot> = Vec::new();
    for row in &r.rows {
        if !plots
            .iter()
            .any(|p| p.benchmark == row.benchmark && p.metric == row.metric)
        {
            plots.push(plot(r, row));
        }
    }
    let bars: Vec<ProfileChart> = r.profiles.iter().map(profile_chart).collect();
    let mut env = minijinja::Environment::new();
    env.add_template("report.html", include_str!("report.html"))
        .context("load the report template")?;
    let t = env.get_template("report.html")?;
    let ctx = minijinja::context! {
        r => minijinja::Value::from(minijinja::value::Serde(r)),
        rows => minijinja::Value::from(minijinja::value::Serde(&rows)),
        plots => minijinja::Value::from(minijinja::value::Serde(&plots)),
        profiles => minijinja::Value::from(minijinja::value::Serde(&bars)),
    };
    t.render(ctx).context("render the HTML report")
}

/// A called cell's differential profile as a chart.
#[derive(Serialize)]
struct ProfileChart {
    title: String,
    svg: String,
}

/// Functions in a cell's chart.
const CHART_ROWS: usize = 12;

fn profile_chart(p: &super::profiles::CellProfile) -> ProfileChart {
    let bars: Vec<svg::Bar> = p
        .diff
        .rows
        .iter()
        .take(CHART_ROWS)
        .map(|r| svg::Bar {
            name: r.name.clone(),
            delta: r.delta,
            called: r.called,
        })
        .collect();
    let (tb, tv) = p.diff.total;
    ProfileChart {
        title: format!(
            "{} against base: {} at {} vCPUs, {} → {} instructions per op{}",
            p.variant,
            p.benchmark,
            p.vcpus,
            num(tb.median),
            num(tv.median),
            p.from.as_ref().map(|f| format!(" (from {f})")).unwrap_or_default()
        ),
        svg: svg::delta_bars(&bars),
    }
}

/// A row of the table: one cell per variant, empty where it has none.
fn html_row<'a>(r: &Report, row: &'a Row) -> HtmlRow<'a> {
    let cell = |v: &String| match row.cells.iter().find(|c| &c.variant == v) {
        None => HtmlCell {
            text: String::new(),
            class: "",
        },
        Some(c) => HtmlCell {
            text: cell_text(c),
            class: class_of(c),
        },
    };
    HtmlRow {
        benchmark: &row.benchmark,
        metric: &row.metric,
        unit: &row.unit,
        higher_is_better: row.higher_is_better,
        vcpus: row.vcpus,
        cells: r.variants.iter().map(cell).collect(),
    }
}

/// The plots of `row`'s metric: its scaling over every vCPU count, and a
/// strip of every repetition per vCPU count.
fn plot(r: &Report, row: &Row) -> Plot {
    let same: Vec<&Row> = r
        .rows
        .iter()
        .filter(|x| x.benchmark == row.benchmark && x.metric == row.metric)
        .collect();
    let mut series: Vec<(String, Vec<Point>)> = Vec::new();
    for v in &r.variants {
        let pts: Vec<Point> = same
            .iter()
            .filter_map(|x| {
                let c = x.cells.iter().find(|c| &c.variant == v)?;
                let s = c.summary.as_ref()?;
                Some(Point {
                    x: x.vcpus as f64,
                    y: s.median,
                    lo: s.ci_lo,
                    hi: s.ci_hi,
                    ci: s.ci_exact,
                })
            })
            .collect();
        if !pts.is_empty() {
            series.push((v.clone(), pts));
        }
    }
    let label = format!("{} ({})", row.metric, row.unit);
    let strips = same
        .iter()
        .map(|x| Strip {
            vcpus: x.vcpus,
            svg: svg::strip(
                &x.cells
                    .iter()
                    .map(|c| (c.variant.clone(), c.values.clone()))
                    .collect::<Vec<_>>(),
                &label,
            ),
        })
        .collect();
    let scaling = svg::scaling(&series, &label, row.linear_reference);
    Plot {
        benchmark: row.benchmark.clone(),
        metric: row.metric.clone(),
        scaling,
        strips,
    }
}
