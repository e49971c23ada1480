//! The HTML report: a minijinja template rendered from a serialisable
//! context (the [`Report`] plus SVG plots), so tests can check the context
//! and the page alike.

use anyhow::{Context, Result};
use serde::Serialize;

use super::svg::{self, Point};
use crate::report::{cell_text, num, Cell, Report, Row};
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
    id: String,
    svg: String,
}

#[derive(Serialize)]
struct Plot {
    benchmark: String,
    metric: String,
    /// Empty with one vCPU count: a curve of one point says nothing.
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
    let forest = super::plots::forest(&forest_rows(r));
    let mut env = minijinja::Environment::new();
    env.add_template("report.html", include_str!("report.html"))
        .context("load the report template")?;
    let t = env.get_template("report.html")?;
    let ctx = minijinja::context! {
        r => minijinja::Value::from(minijinja::value::Serde(r)),
        rows => minijinja::Value::from(minijinja::value::Serde(&rows)),
        plots => minijinja::Value::from(minijinja::value::Serde(&plots)),
        profiles => minijinja::Value::from(minijinja::value::Serde(&bars)),
        contention => minijinja::Value::from(minijinja::value::Serde(&contention_rows(r))),
        scaling => minijinja::Value::from(minijinja::value::Serde(&super::scaling::html_lines(r))),
        scaling_plots => minijinja::Value::from(minijinja::value::Serde(&super::scaling::html_plots(r))),
        scaling_rules => r.scaling.iter().map(|c| c.scaling.rule.clone()).collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>(),
        unmeasured => r.coverage.iter().filter(|c| c.unmeasured()).map(|c| c.series.clone()).collect::<Vec<_>>(),
        summary => summary(r),
        forest => forest,
    };
    t.render(ctx).context("render the HTML report")
}

/// One line of the contention table: a row that moved, or a cell's only
/// line when none did.
#[derive(Serialize)]
struct ContentionLine {
    cell: String,
    verdict: &'static str,
    class: &'static str,
    row: String,
    per_op: String,
    delta: String,
    writers: String,
    held: String,
    by: String,
}

/// Rows of a cell shown in the contention table when none moved.
const CONTENTION_QUIET_ROWS: usize = 1;

/// Called rows of a cell shown in the contention table; the rest are
/// counted in one line (a damaged or hand-made run called 100,000 and made
/// a 25 MB page), and `report.json` lists them all.
const CONTENTION_CALLED_ROWS: usize = 50;

fn contention_rows(r: &Report) -> Vec<ContentionLine> {
    use crate::profile::contention::Verdict as V;
    let mut out = Vec::new();
    for c in &r.contention {
        let d = &c.diff;
        let class = match d.verdict {
            V::More => "regressed",
            V::Less => "improved",
            V::Same => "",
        };
        let called = d.called().count();
        let shown: Vec<_> = match called {
            0 => d.rows.iter().take(CONTENTION_QUIET_ROWS).collect(),
            _ => d.called().take(CONTENTION_CALLED_ROWS).collect(),
        };
        let more = called.saturating_sub(CONTENTION_CALLED_ROWS);
        let blank = || ContentionLine {
            cell: c.title(),
            verdict: d.verdict.text(),
            class,
            row: "no shared line or lock".into(),
            per_op: String::new(),
            delta: String::new(),
            writers: String::new(),
            held: String::new(),
            by: String::new(),
        };
        if shown.is_empty() {
            out.push(blank());
        }
        for row in shown {
            out.push(contention_line(row, blank()));
        }
        if more > 0 {
            out.push(ContentionLine {
                row: format!("… {more} more called rows (report.json lists them)"),
                ..blank()
            });
        }
    }
    out
}

/// One row of a cell's contention profile as a line of the table; `cell`
/// gives the cell's own columns.
fn contention_line(row: &crate::profile::contention::DiffRow, cell: ContentionLine) -> ContentionLine {
    let mark = match row.mark() {
        ' ' => String::new(),
        m => format!("{m} "),
    };
    ContentionLine {
        row: format!("{mark}{}", row.text),
        per_op: format!(
            "{} → {}",
            crate::report::num(row.base.median),
            crate::report::num(row.variant.median)
        ),
        delta: format!("{:+.2}", row.delta),
        writers: row.writers.to_string(),
        held: row
            .hold
            .map(|h| format!("{} → {}", crate::report::num(h.base), crate::report::num(h.variant)))
            .unwrap_or_default(),
        by: row.funcs.first().map(|f| f.0.clone()).unwrap_or_default(),
        ..cell
    }
}

/// A called cell's differential profile as a chart.
#[derive(Serialize)]
struct ProfileChart {
    title: String,
    svg: String,
}

/// Functions in a cell's chart.
const CHART_ROWS: usize = 12;

fn profile_chart(p: &crate::report::profiles::CellProfile) -> ProfileChart {
    let bars: Vec<svg::Bar> = p
        .diff
        .rows
        .iter()
        .take(CHART_ROWS)
        .map(|r| svg::Bar {
            name: r.name.clone(),
            delta: r.delta,
            called: r.called,
            calls: (r.calls.base, r.calls.variant),
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
            id: cell_id(x),
            svg: super::plots::cell(&x.cells.iter().map(column).collect::<Vec<_>>(), &label),
        })
        .collect();
    let scaling = if same.len() > 1 {
        svg::scaling(&series, &label, row.linear_reference)
    } else {
        String::new()
    };
    Plot {
        benchmark: row.benchmark.clone(),
        metric: row.metric.clone(),
        scaling,
        strips,
    }
}

/// A cell's boots for its plot.
fn column(c: &Cell) -> super::plots::Column {
    super::plots::Column {
        name: c.variant.clone(),
        boots: c.boots.clone(),
        summary: c.summary.map(|s| (s.median, s.ci_lo, s.ci_hi, s.ci_exact)),
    }
}

/// The anchor of a row's plot (benchmark, metric, vCPUs): what the forest
/// plot's rows link to.
fn cell_id(row: &Row) -> String {
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect()
    };
    format!("cell-{}-{}-{}", safe(&row.benchmark), safe(&row.metric), row.vcpus)
}

/// The colour of a verdict's class ([`class_of`]), grey for the others.
fn colour_of(class: &str) -> &'static str {
    match class {
        "regressed" => "#c62828",
        "improved" => "#2e7d32",
        "small" => "#b08800",
        "unsure" => "#e65100",
        "failsmore" => "#ad1457",
        "failed" => "#a00000",
        _ => "#666666",
    }
}

/// The forest plot's rows: every variant's cell against base, the largest
/// change first, those without a comparison last.
fn forest_rows(r: &Report) -> Vec<super::plots::ForestRow> {
    let mut rows: Vec<super::plots::ForestRow> = Vec::new();
    for row in &r.rows {
        for c in row.cells.iter().filter(|c| c.variant != "base") {
            let d = c.decision.as_ref();
            let change = d.and_then(|d| d.ratio).map(|x| {
                let pc = |v: f64| (v - 1.0) * 100.0;
                (pc(x.ratio), pc(x.lo), pc(x.hi))
            });
            let words = match d {
                Some(d) => format!("{} {}", super::compact::signed_change(d).unwrap_or_default(), d.verdict),
                None => "no value".into(),
            };
            rows.push(super::plots::ForestRow {
                label: format!("{} · {} {} · {} vCPUs", c.variant, row.benchmark, row.metric, row.vcpus),
                href: format!("#{}", cell_id(row)),
                change,
                threshold: row.floor * 100.0,
                colour: colour_of(class_of(c)),
                text: words.trim().to_string(),
            });
        }
    }
    let size = |r: &super::plots::ForestRow| r.change.map_or(-1.0, |c| c.0.abs());
    rows.sort_by(|a, b| size(b).total_cmp(&size(a)));
    rows
}

/// The line at the top: the verdicts counted, the clock, the boots, the
/// wall time, the host.
fn summary(r: &Report) -> String {
    let mut counts: Vec<(String, usize)> = [Verdict::Regressed, Verdict::Improved]
        .iter()
        .map(|v| (v.to_string(), 0))
        .collect();
    let mut failed = 0;
    for c in r.rows.iter().flat_map(|row| row.cells.iter()) {
        if c.summary.is_none() && c.failure.is_some() {
            failed += 1;
        }
        let Some(d) = c.decision.as_ref() else { continue };
        let label = d.verdict.to_string();
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    let mut words: Vec<String> = counts.iter().map(|(l, n)| format!("{n} {l}")).collect();
    words.push(format!("{failed} failed"));
    let boots_failed = match r.boots.iter().filter(|b| b.error.is_some()).count() {
        0 => "none failed".to_string(),
        n => format!("{n} failed"),
    };
    let clock = r.clock.map_or("clock not recorded", |c| c.name());
    let wall = r
        .wall_s
        .map(|s| format!(" · {} wall time", duration(s)))
        .unwrap_or_default();
    let more = |v| r.contention.iter().filter(|c| c.diff.verdict == v).count();
    use crate::profile::contention::Verdict as V;
    if !r.contention.is_empty() {
        words.push(format!(
            "contention: {} more, {} less, {} ≈",
            more(V::More),
            more(V::Less),
            more(V::Same)
        ));
    }
    words.extend(super::scaling::counts(r));
    format!(
        "{} · {clock} · {} boots, {boots_failed}{wall} · {}",
        words.join(", "),
        r.boots.len(),
        r.host
    )
}

/// Seconds as `4 min 58 s`, `1 h 02 min`, `12 s`.
fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}
