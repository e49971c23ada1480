//! The decision rule in words, printed with every report.

use crate::config::Matrix;
use crate::stats::Rule;

/// The decision rule in words, as printed with every report.
pub fn rule_text(m: &Matrix, rule: &Rule, comparisons: usize, floor_source: &str) -> String {
    format!(
        "unit: the boot; each boot's value is the median of its measured repetitions (the {} warm-up repetition(s) \
         per boot excluded; boots that never ended, e.g. cut off by an interruption, not counted; a boot that ended \
         with an error keeps the repetitions it completed). cell: median of the boot values with a distribution-free \
         95% CI, or the range where fewer than 6 boots allow no such interval; n = boots × repetitions. change: ratio \
         of medians (variant/base) over boots with a bootstrap 95% CI ({} resamples, seed {}), shown as worse by / \
         better by whatever the metric's direction, the ± being that interval. test: two-sided Mann-Whitney U over \
         boots; Benjamini-Hochberg q across the {} comparisons of this report; alpha {}; p and q both printed. floor: \
         per benchmark, metric and vCPUs, the larger of {:.1}% and the calibrated A/A floor ({}). regressed / improved \
         = q ≤ alpha and the whole CI beyond the floor; small = q ≤ alpha and the CI inside the floor; unsure = q ≤ \
         alpha and the CI straddles the floor (needs more boots); ≈ = q > alpha and the CI inside the floor; ~ = q > \
         alpha (mde = smallest change detectable with 80% power at the level the cell had to pass BH, never below the \
         floor); fails more = the variant failed (a failed or timed-out repetition, a failed or hung boot) in a larger \
         share of its boots than base (one-sided Fisher exact p); ? = fewer than {} boots per side. gate: fails on \
         regressed in a key metric and on fails more with Fisher p ≤ alpha; unsure with an interval reaching beyond \
         the floor on the worse side, and fails more with a larger p, are warnings, fatal with --strict. Boot order \
         seed {}.",
        m.sampling.warmup_repetitions,
        rule.resamples,
        rule.seed,
        comparisons,
        rule.alpha,
        rule.floor * 100.0,
        floor_source,
        rule.min_boots,
        m.sampling.seed
    )
}
