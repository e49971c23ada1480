//! Percentile-bootstrap confidence interval for the ratio of two medians.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::descriptive::{median_in_place, quantile_sorted};

/// Confidence level of the bootstrap interval.
const RATIO_CI_LEVEL: f64 = 0.95;

/// A ratio `median(new) / median(base)` with its 95% confidence interval.
///
/// `ratio > 1` means the new variant's median is larger (faster for a throughput metric,
/// slower for a latency metric).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioCi {
    /// Point estimate `median(new) / median(base)`.
    pub ratio: f64,
    /// Lower end of the 95% percentile-bootstrap interval.
    pub lo: f64,
    /// Upper end of the 95% percentile-bootstrap interval.
    pub hi: f64,
}

/// Ratio of medians `new / base` with a percentile-bootstrap 95% confidence interval.
///
/// Each of `resamples` rounds draws `base.len()` values from `base` and `new.len()`
/// values from `new`, independently and with replacement, and records the ratio of the
/// two resample medians; `lo` and `hi` are the 2.5% and 97.5% quantiles of those ratios
/// (linear interpolation, as numpy's default). Draws come from `ChaCha8Rng` seeded with
/// `seed` via `seed_from_u64`, base first then new in each round, so the same inputs and
/// seed always give the same interval (with the same `rand`/`rand_chacha` versions).
///
/// Returns `None` when a sample is empty or holds a non-finite value, when
/// `resamples == 0`, or when `median(base)` is zero. Meant for positive metrics: with
/// zeros or mixed signs a resample can have a zero base median, and the resulting
/// infinite or NaN ratios make the interval meaningless.
pub fn bootstrap_ratio_of_medians(base: &[f64], new: &[f64], resamples: usize, seed: u64) -> Option<RatioCi> {
    if base.is_empty() || new.is_empty() || resamples == 0 || base.iter().chain(new).any(|x| !x.is_finite()) {
        return None;
    }
    let mut bb = base.to_vec();
    let mut nb = new.to_vec();
    let mb = median_in_place(&mut bb);
    let mn = median_in_place(&mut nb);
    if mb == 0.0 {
        return None;
    }
    let ratio = mn / mb;

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for v in bb.iter_mut() {
            *v = base[rng.random_range(0..base.len())];
        }
        for v in nb.iter_mut() {
            *v = new[rng.random_range(0..new.len())];
        }
        let r = median_in_place(&mut nb) / median_in_place(&mut bb);
        ratios.push(r);
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - RATIO_CI_LEVEL) / 2.0;
    Some(RatioCi {
        ratio,
        lo: quantile_sorted(&ratios, tail),
        hi: quantile_sorted(&ratios, 1.0 - tail),
    })
}
