//! Descriptive statistics of one cell: median, order-statistic median CI, spread.

use serde::{Deserialize, Serialize};

/// Confidence level of the median interval reported by [`summarize`].
const MEDIAN_CI_LEVEL: f64 = 0.95;

/// Summary of the samples of one cell (one benchmark metric on one kernel variant).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Sample median (mean of the two middle values when `n` is even).
    pub median: f64,
    /// Lower end of the confidence interval for the median (an order statistic).
    pub ci_lo: f64,
    /// Upper end of the confidence interval for the median (an order statistic).
    pub ci_hi: f64,
    /// `true` when `[ci_lo, ci_hi]` is a genuine distribution-free interval with coverage
    /// of at least 95%; `false` when `n < 6`, too few samples for any 95% order-statistic
    /// interval, in which case the interval is just `[min, max]` (coverage `ci_level`).
    pub ci_exact: bool,
    /// Exact coverage of `[ci_lo, ci_hi]` for a continuous distribution:
    /// `1 - 2 * P(Binomial(n, 1/2) <= k - 1)` for the order statistics `k` and `n - k + 1`.
    /// At least 0.95 when `ci_exact`; below 0.95 otherwise.
    pub ci_level: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (denominator `n - 1`); 0 when `n == 1`.
    pub stddev: f64,
}

/// Median of `xs` (mean of the two middle values when the length is even), as numpy's
/// `median`. `None` when `xs` is empty or holds a non-finite value.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut buf = xs.to_vec();
    Some(median_in_place(&mut buf))
}

/// Median of a non-empty slice of finite values; reorders the slice.
pub(crate) fn median_in_place(buf: &mut [f64]) -> f64 {
    let n = buf.len();
    debug_assert!(n > 0);
    let mid = n / 2;
    let (left, m, _) = buf.select_nth_unstable_by(mid, f64::total_cmp);
    let hi = *m;
    if n % 2 == 1 {
        hi
    } else {
        let lo = left.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        lo + (hi - lo) / 2.0
    }
}

/// Quantile `q` in `[0, 1]` of an ascending slice by linear interpolation between order
/// statistics (numpy's default, Hyndman-Fan type 7). The slice must be non-empty.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    debug_assert!(n > 0);
    let h = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    let frac = h - lo as f64;
    if lo == hi || frac == 0.0 {
        sorted[lo]
    } else {
        sorted[lo] + frac * (sorted[hi] - sorted[lo])
    }
}

/// Median absolute deviation from the median (unscaled). `xs` must be non-empty and finite.
pub(crate) fn mad(xs: &[f64]) -> f64 {
    let mut buf = xs.to_vec();
    let m = median_in_place(&mut buf);
    for v in buf.iter_mut() {
        *v = (*v - m).abs();
    }
    median_in_place(&mut buf)
}

/// 1-based order statistics `(k, n - k + 1)` bounding the distribution-free confidence
/// interval for the median of `n` samples at confidence `level`, with its exact coverage.
///
/// `k` is the largest integer with `2 * P(Binomial(n, 1/2) <= k - 1) <= 1 - level`, which
/// gives the narrowest symmetric order-statistic interval whose coverage is at least
/// `level` for any continuous distribution. Returns `None` when no such `k >= 1` exists
/// (for `level = 0.95`, when `n < 6`).
pub fn median_ci_indices(n: usize, level: f64) -> Option<(usize, usize, f64)> {
    if n == 0 || !(0.0..1.0).contains(&level) {
        return None;
    }
    let alpha_half = (1.0 - level) / 2.0;
    // Walk the Binomial(n, 1/2) CDF upwards in log space (no overflow for large n).
    let nf = n as f64;
    let mut ln_pmf = -nf * std::f64::consts::LN_2; // ln P(B = 0)
    let mut cdf = 0.0; // P(B <= i - 1) at the top of iteration i
    let mut best: Option<(usize, f64)> = None;
    for k in 1..=n / 2 {
        let i = (k - 1) as f64; // add P(B = k - 1)
        cdf += ln_pmf.exp();
        ln_pmf += ((nf - i) / (i + 1.0)).ln();
        if cdf <= alpha_half * (1.0 + 1e-12) {
            best = Some((k, 1.0 - 2.0 * cdf));
        } else {
            break;
        }
    }
    best.map(|(k, cov)| (k, n - k + 1, cov))
}

/// Summarises the samples of one cell: median with its 95% order-statistic confidence
/// interval (see [`median_ci_indices`]), min, max, mean and sample standard deviation.
///
/// When `n < 6` no 95% order-statistic interval exists; the interval is then `[min, max]`,
/// `ci_exact` is `false` and `ci_level` gives its (lower) coverage `1 - 2^(1-n)`.
/// Returns `None` for an empty slice or any non-finite sample.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len();
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = quantile_sorted(&sorted, 0.5);
    let min = sorted[0];
    let max = sorted[n - 1];
    let mean = sorted.iter().sum::<f64>() / n as f64;
    let stddev = if n > 1 {
        (sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let (ci_lo, ci_hi, ci_exact, ci_level) = match median_ci_indices(n, MEDIAN_CI_LEVEL) {
        Some((lo, hi, cov)) => (sorted[lo - 1], sorted[hi - 1], true, cov),
        None => (min, max, false, 1.0 - 2.0 * 0.5f64.powi(n as i32)),
    };
    Some(Summary {
        n,
        median,
        ci_lo,
        ci_hi,
        ci_exact,
        ci_level,
        min,
        max,
        mean,
        stddev,
    })
}
