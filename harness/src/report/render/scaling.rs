//! The scaling view drawn ([`crate::report::scaling`]): the text section
//! under the contention verdicts (each cell's verdict with the rows that
//! carry it, the scheduler's share of the interaction, the whole kernel's
//! row and every marked one), the rows `harness explain` prints, and the
//! HTML report's table and plots (per-op cost against vCPUs on a log2
//! axis, base and the variant).

use serde::Serialize;

use super::layout::wrap;
use super::text::num;
use crate::profile::scaling::{Mark, Measure, Row, Scaling, ScalingVerdict};
use crate::report::Report;
use crate::ui::printable;

/// Rows besides the whole kernel's and the marked ones shown under a
/// called cell in the text report (and the HTML table): the next by
/// |interaction|.
pub const TEXT_ROWS: usize = 2;

/// `+24600`, `-310`, `0`.
fn signed(x: f64) -> String {
    match x > 0.0 {
        true => format!("+{}", num(x)),
        false => num(x),
    }
}

/// A side's medians at every count: `102 → 312`.
fn medians(r: &Row, base: bool) -> String {
    let at = |a: &crate::profile::scaling::At| if base { a.base.median } else { a.variant.median };
    r.at.iter().map(|a| num(at(a))).collect::<Vec<_>>().join(" → ")
}

/// The verdict with the rows that carry it, in a line: `scales worse:
/// harness_cpu_walk (instructions per op) +24600 against base's growth`.
pub fn summary(s: &Scaling, rows: usize) -> String {
    let carried: Vec<String> = s
        .carried()
        .take(rows)
        .map(|r| format!("{} {} against base's growth", r.text(), signed(r.interaction)))
        .collect();
    let more = s.carried().count().saturating_sub(rows);
    match (s.verdict, carried.is_empty()) {
        (ScalingVerdict::None, _) => format!("no verdict: {}", s.why.as_deref().unwrap_or("")),
        (v, true) => v.text().to_string(),
        (v, false) if more > 0 => format!("{}: {}; {more} more", v.text(), carried.join("; ")),
        (v, false) => format!("{}: {}", v.text(), carried.join("; ")),
    }
}

/// How much of the whole kernel's interaction the scheduler's and the
/// clock's functions hold, in a line.
pub fn scheduler_text(s: &Scaling) -> String {
    let share = s
        .scheduler
        .share
        .map(|x| format!(" ({:.0}%)", x * 100.0 + 0.0))
        .unwrap_or_default();
    format!(
        "scheduler and timing functions: {} of the whole kernel's {} instructions per op of interaction{share}; they never carry the verdict",
        signed(s.scheduler.interaction),
        signed(s.scheduler.kernel)
    )
}

/// One row in words: its medians at every count each side, its growth
/// against base's and its threshold, its mark and class.
pub fn row_text(r: &Row, vcpus: &[u32]) -> String {
    let counts: Vec<String> = vcpus.iter().map(u32::to_string).collect();
    let mut s = format!(
        "{} {}: base {}, variant {} at {} vCPUs; {} against base's growth, threshold {}",
        r.symbol(),
        printable(&r.text()),
        medians(r, true),
        medians(r, false),
        counts.join(" → "),
        signed(r.interaction),
        num(r.threshold)
    );
    if let Some(w) = writers(r) {
        s.push_str(&w);
    }
    s.push_str(match (r.mark, r.held_back) {
        (Mark::Worse, _) => "; scales worse",
        (Mark::Better, _) => "; scales better",
        (_, true) => "; held back: a heap row is called from 5 boots an arm",
        (Mark::Unjudged, _) => "; too few boots to judge",
        _ => "",
    });
    if r.measure == Measure::Kernel {
        s.push_str(" (its own mark: never the cell's alone)");
    } else if r.scheduler {
        s.push_str(" (scheduler or timing: never the cell's)");
    }
    s
}

/// `; vCPUs writing 2 → 8 (base), 2 → 8 (variant)` of a contention row.
fn writers(r: &Row) -> Option<String> {
    let w: Vec<(u32, u32)> = r.at.iter().map(|a| a.writers).collect::<Option<_>>()?;
    let side = |pick: fn(&(u32, u32)) -> u32| w.iter().map(|x| pick(x).to_string()).collect::<Vec<_>>().join(" → ");
    Some(format!(
        "; vCPUs writing {} (base), {} (variant)",
        side(|x| x.0),
        side(|x| x.1)
    ))
}

/// The rows shown under a cell: the whole kernel's, every marked or held
/// back one, and for a called cell the next [`TEXT_ROWS`] by |interaction|.
pub fn shown(s: &Scaling) -> Vec<&Row> {
    let marked = |r: &Row| matches!(r.mark, Mark::Worse | Mark::Better) || r.held_back;
    let mut out: Vec<&Row> = vec![s.kernel()];
    out.extend(s.rows.iter().skip(1).filter(|r| marked(r)));
    if matches!(s.verdict, ScalingVerdict::Worse | ScalingVerdict::Better) {
        let mut rest: Vec<&Row> = s.rows.iter().skip(1).filter(|r| !marked(r)).collect();
        rest.sort_by(|x, y| y.interaction.abs().total_cmp(&x.interaction.abs()));
        out.extend(
            rest.into_iter()
                .filter(|r| r.measure == Measure::Function)
                .take(TEXT_ROWS),
        );
    }
    out
}

/// The given rows of a view, each wrapped to `width`.
pub fn rows_text(s: &Scaling, rows: &[&Row], width: usize) -> String {
    rows.iter().map(|r| wrap(&row_text(r, &s.vcpus), width, 6)).collect()
}

/// Under the contention verdicts, the scaling view of every cell measured
/// at two or more vCPU counts: the rule once, then each cell's verdict,
/// the scheduler's share, and its rows ([`shown`]).
pub fn section(r: &Report, width: usize) -> String {
    if r.scaling.is_empty() {
        return String::new();
    }
    let mut out = wrap(
        "scaling (each variant's growth per op from the smallest vCPU count to the largest against base's, from the kernel profiles; a verdict of its own, `harness explain` gives every row):",
        width,
        2,
    );
    let rules: std::collections::BTreeSet<&str> = r.scaling.iter().map(|c| c.scaling.rule.as_str()).collect();
    for rule in rules {
        out.push_str(&wrap(&format!("  rule: {rule}"), width, 4));
    }
    for c in &r.scaling {
        let s = &c.scaling;
        out.push_str(&wrap(
            &printable(&format!("  {}: {}", c.title(), summary(s, 3))),
            width,
            4,
        ));
        if s.verdict != ScalingVerdict::None {
            out.push_str(&wrap(&format!("    {}", scheduler_text(s)), width, 6));
        }
        out.push_str(&rows_text(s, &shown(s), width));
    }
    out
}

/// One line of the HTML report's scaling table.
#[derive(Serialize)]
pub struct HtmlLine {
    cell: String,
    verdict: String,
    class: &'static str,
    row: String,
    base: String,
    variant: String,
    growth: String,
    threshold: String,
}

/// The HTML table: under each cell its shown rows ([`shown`]).
pub fn html_lines(r: &Report) -> Vec<HtmlLine> {
    let mut out = Vec::new();
    for c in &r.scaling {
        let s = &c.scaling;
        let class = match s.verdict {
            ScalingVerdict::Worse => "regressed",
            ScalingVerdict::Better => "improved",
            _ => "",
        };
        for row in shown(s) {
            let mark = match row.symbol() {
                ' ' => String::new(),
                m => format!("{m} "),
            };
            let tag = match (row.measure, row.scheduler) {
                (Measure::Kernel, _) => " (never the cell's alone)",
                (_, true) => " (scheduler or timing)",
                _ => "",
            };
            out.push(HtmlLine {
                cell: c.title(),
                verdict: summary(s, 1),
                class,
                row: format!("{mark}{}{tag}", row.text()),
                base: medians(row, true),
                variant: medians(row, false),
                growth: signed(row.interaction),
                threshold: num(row.threshold),
            });
        }
    }
    out
}

/// A plot of the HTML report's scaling section.
#[derive(Serialize)]
pub struct HtmlPlot {
    title: String,
    svg: String,
}

/// Per cell, the whole kernel's per-op cost against vCPUs and that of
/// each row carrying its verdict (at most two), base and the variant.
pub fn html_plots(r: &Report) -> Vec<HtmlPlot> {
    let mut out = Vec::new();
    for c in &r.scaling {
        let s = &c.scaling;
        for row in std::iter::once(s.kernel()).chain(s.carried().take(2)) {
            let points = |base: bool| -> Vec<super::svg::Point> {
                row.at
                    .iter()
                    .map(|a| {
                        let st = if base { a.base } else { a.variant };
                        super::svg::Point {
                            x: a.vcpus as f64,
                            y: st.median,
                            lo: st.min,
                            hi: st.max,
                            ci: false,
                        }
                    })
                    .collect()
            };
            let series = [("base".to_string(), points(true)), (c.variant.clone(), points(false))];
            out.push(HtmlPlot {
                title: format!("{}: {} — {}", c.title(), row.text(), s.verdict.text()),
                svg: super::plots::log2_curves(&series, row.measure.unit()),
            });
        }
    }
    out
}

/// The summary line's words: `scaling: 1 worse, 0 better, 2 ≈` (and those
/// without a verdict); None without a scaling view.
pub fn counts(r: &Report) -> Option<String> {
    let n = |v: ScalingVerdict| r.scaling.iter().filter(|c| c.scaling.verdict == v).count();
    let none = match n(ScalingVerdict::None) {
        0 => String::new(),
        k => format!(", {k} no verdict"),
    };
    (!r.scaling.is_empty()).then(|| {
        format!(
            "scaling: {} worse, {} better, {} ≈{none}",
            n(ScalingVerdict::Worse),
            n(ScalingVerdict::Better),
            n(ScalingVerdict::Same)
        )
    })
}
