//! Statistics for deciding whether a kernel change made a benchmark faster or slower.
//!
//! This module owns every number the harness prints about a comparison, and the rule
//! that turns those numbers into a verdict. It implements the method of
//! `shared/design/statistics.md`:
//!
//! * **Cell value** — [`summarize`]: median with a distribution-free order-statistic
//!   95% confidence interval (binomial), plus min/max/mean/stddev.
//! * **Test** — [`mann_whitney_u`]: two-sided Mann-Whitney U, exact null distribution for
//!   small tie-free samples, else the normal approximation with tie and continuity
//!   correction (the same choice as `scipy.stats.mannwhitneyu(method='auto')`).
//! * **Multiplicity** — [`benjamini_hochberg`]: BH q-values across the whole report.
//! * **Change** — [`bootstrap_ratio_of_medians`]: `median(new)/median(base)` with a
//!   percentile bootstrap 95% CI from a seeded `ChaCha8Rng`.
//! * **Floor** — [`noise_floor`] (from A/A runs) and [`effect_floor`] (`max(2%, noise)`).
//! * **Verdict** — [`decide_all`] applies the [`Rule`] to every cell and returns a
//!   [`Decision`] with a [`Verdict`]: regressed / improved / `~` / `≈` / small / `?`.
//!
//! Everything here is a pure function of its inputs: no I/O, no clocks, no global state,
//! and every random draw comes from a generator seeded by the caller, so a report can be
//! recomputed bit-for-bit from its raw samples and the printed rule.

mod bootstrap;
mod decide;
mod descriptive;
mod fdr;
mod mwu;

#[cfg(test)]
mod tests;

pub use bootstrap::{bootstrap_ratio_of_medians, RatioCi};
pub use decide::{
    decide_all, effect_floor, minimum_detectable_effect, noise_floor, Decision, Rule, Verdict,
    MIN_EFFECT_FLOOR,
};
pub use descriptive::{median, median_ci_indices, summarize, Summary};
pub use fdr::benjamini_hochberg;
pub use mwu::{mann_whitney_u, MannWhitney};
