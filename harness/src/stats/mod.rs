//! Statistics for deciding whether a kernel change made a benchmark faster or slower.
//!
//! This module owns every number the harness prints about a comparison, and the rule
//! that turns those numbers into a verdict. It implements the method of
//! `shared/design/statistics.md`, with the boot as the experimental unit: callers pass
//! one value per boot (the median of that boot's repetitions).
//!
//! * **Cell value** — [`summarize`]: median with a distribution-free order-statistic
//!   95% confidence interval (binomial), plus min/max/mean/stddev.
//! * **Test** — [`mann_whitney_u`]: two-sided Mann-Whitney U, exact null distribution for
//!   small tie-free samples, else the normal approximation with tie and continuity
//!   correction (the same choice as `scipy.stats.mannwhitneyu(method='auto')`);
//!   [`smallest_p`] is the least p a number of boots allows.
//! * **Multiplicity** — [`benjamini_hochberg`]: BH q-values across the whole report.
//! * **Change** — [`bootstrap_ratio_of_medians`]: `median(new)/median(base)` with a
//!   percentile bootstrap 95% CI from a seeded `ChaCha8Rng`.
//! * **Floor** — [`aa_floor`] (from the boots of an A/A run) and [`effect_floor`]
//!   (`max(2%, measured)`).
//! * **Failures** — [`fisher_greater`]: does the new variant fail more often than base.
//! * **Change points** — [`changepoint::e_divisive`]: E-divisive means with a
//!   permutation or AR(1) bootstrap test over a nightly series, for the history.
//! * **Verdict** — [`decide_all`] applies the [`Rule`] to every [`Comparison`] and
//!   returns a [`Decision`] with a [`Verdict`]: regressed / improved / `~` / `≈` /
//!   small / unsure / fails more / `?`.
//! * **Model** — [`model`]: a labelled model, not a measurement, of the throughput of N
//!   CPUs looping on one op, by exact mean-value analysis of per-op demands counted in
//!   an emulator; [`model::compare`] sets a base against a variant.
//!
//! Everything here is a pure function of its inputs: no I/O, no clocks, no global state,
//! and every random draw comes from a generator seeded by the caller, so a report can be
//! recomputed bit-for-bit from its raw samples and the printed rule.

pub mod across;
mod bootstrap;
pub mod changepoint;
mod decide;
mod descriptive;
mod fdr;
mod fisher;
mod floor;
pub mod model;
mod mwu;
pub mod stages;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod sim_stages;
#[cfg(test)]
mod tests;

pub use bootstrap::{bootstrap_ratio_of_medians, RatioCi};
pub use decide::{
    classify, decide_all, decide_pretested, detectable_change, minimum_detectable_effect, relative_spread, Comparison,
    Decision, FailureRate, Failures, Pretested, Rule, Verdict, WorkCalls,
};
pub use descriptive::{median, median_ci_indices, summarize, Summary};
pub use fdr::benjamini_hochberg;
pub use fisher::fisher_greater;
pub use floor::{aa_floor, effect_floor, AaFloor, MIN_EFFECT_FLOOR};
pub use mwu::{mann_whitney_u, smallest_p, MannWhitney};
