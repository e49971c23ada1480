//! The decision rule in words, printed with every report.

use super::Row;
use crate::config::Matrix;
use crate::stats::stages::Spending;
use crate::stats::{detectable_change, Rule};

/// The decision rule in words, as printed with every report.
pub fn rule_text(m: &Matrix, rule: &Rule, comparisons: usize, floor_source: &str) -> String {
    let extra = m.statistics.second_stage_boots as usize;
    let staged = if extra > 0 {
        format!(
            " {}.",
            Spending::pocock(rule.alpha, m.sampling.boots as usize, extra).text()
        )
    } else {
        String::new()
    };
    let text = format!(
        "unit: the boot; each boot's value is the median of its measured repetitions (the {} warm-up repetition(s) \
         per boot excluded; boots that never ended, e.g. cut off by an interruption, not counted; a boot that ended \
         with an error keeps the repetitions it completed). cell: median of the boot values with a distribution-free \
         95% CI, or the range where fewer than 6 boots allow no such interval; n = boots × repetitions. change: ratio \
         of medians (variant/base) over boots with a bootstrap 95% CI ({} resamples, seed {}), shown as worse by / \
         better by whatever the metric's direction, the ± being that interval. test: two-sided Mann-Whitney U over \
         boots; Benjamini-Hochberg q across the {} comparisons of this report; alpha {}; p and q both printed. threshold: \
         the practical threshold the matrix declares for the metric ({:.1}% unless it names one), the interval \
         carrying the noise once (a calibrated A/A floor is not added: {}). regressed / improved \
         = q ≤ alpha and the whole CI beyond the threshold; small = q ≤ alpha and the CI inside it; unsure = q ≤ \
         alpha and the CI straddles it (needs more boots); ≈ = q > alpha and the CI inside it; ~ = q > \
         alpha (with the change a regressed call needs: the size called regressed 80% of the time as the only change \
         among this report's comparisons); fails more = the variant failed (a failed or timed-out repetition, a failed or hung boot) in a larger \
         share of its boots than base (one-sided Fisher exact p); ? = fewer than {} boots per side. gate: fails on \
         regressed in a key metric and on fails more with Fisher p ≤ alpha; unsure with an interval reaching beyond \
         the threshold on the worse side, and fails more with a larger p, are warnings, fatal with --strict. Boot order \
         seed {}.",
        m.sampling.warmup_repetitions,
        rule.resamples,
        rule.seed,
        comparisons,
        rule.alpha,
        m.statistics.threshold * 100.0,
        floor_source,
        rule.min_boots,
        m.sampling.seed
    );
    text + &staged
}

/// The change a `regressed` call can detect at this run's sampling: the
/// median over its compared cells of each cell's [`detectable_change`], and
/// with the matrix's second stage (its boots added, Pocock's level) when it
/// plans one.
pub fn detectable_text(m: &Matrix, rows: &[Row], comparisons: usize) -> String {
    let ds: Vec<&crate::stats::Decision> = rows
        .iter()
        .flat_map(|r| r.cells.iter().filter_map(|c| c.decision.as_ref()))
        .collect();
    let mut first: Vec<f64> = ds.iter().filter_map(|d| d.detectable).collect();
    if first.is_empty() {
        if ds.iter().any(|d| d.spread.is_some()) {
            return "regressed calls: a change in one cell alone cannot be called at this sampling (its boots cannot reach alpha / m); cells that move together can be, as Benjamini-Hochberg ranks them all".into();
        }
        return "regressed calls: none can be made at this sampling (no compared cell)".into();
    }
    let mid = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (med, lo, hi) = mid(&mut first);
    let n = ds.iter().map(|d| d.n_base.min(d.n_new)).min().unwrap_or(0);
    let mut s = format!(
        "regressed calls: a true change of {:.1}% (median over {} compared cells, {:.1}–{:.1}%) is called regressed 80% of the time as the only change among this report's {comparisons} comparisons, at {n}+ boots per arm",
        med * 100.0, first.len(), lo * 100.0, hi * 100.0
    );
    let extra = m.statistics.second_stage_boots as usize;
    if extra > 0 {
        let sp = Spending::pocock(m.statistics.alpha, m.sampling.boots as usize, extra);
        let level = sp.nominal / comparisons.max(1) as f64;
        let mut second: Vec<f64> = ds
            .iter()
            .filter_map(|d| detectable_change(d.spread?, (d.n_base + extra, d.n_new + extra), d.floor, level))
            .collect();
        if !second.is_empty() {
            s.push_str(&format!(
                "; {:.1}% with the second stage's {extra} more boots per arm ({})",
                mid(&mut second).0 * 100.0,
                sp.text()
            ));
        }
    }
    s
}
