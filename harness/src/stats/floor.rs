//! Effect floors: the smallest change ever called (2%), and the per-metric
//! floor measured from A/A boots of one kernel.

use statrs::distribution::{ChiSquared, ContinuousCDF};

use super::descriptive::median_in_place;

/// The smallest effect floor ever used: changes below 2% are never called regressions.
pub const MIN_EFFECT_FLOOR: f64 = 0.02;

/// z quantile of the 95th percentile of |A/A deviation| (two-sided 95%).
const Z_975: f64 = 1.959_963_984_540_054;

/// Confidence of the upper bound on the boot-to-boot spread.
const SPREAD_UPPER_CONFIDENCE: f64 = 0.95;

/// A floor measured from the per-boot summaries of two identical arms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AaFloor {
    /// The floor, a fraction of the median (e.g. 0.031).
    pub floor: f64,
    /// The deviation actually seen, `|median(b) / median(a) - 1|`.
    pub observed: f64,
    /// Relative boot-to-boot spread (sample sd of all boots / their median).
    pub spread: f64,
    /// One-sided 95% upper confidence bound on `spread` (chi-square).
    pub spread_upper: f64,
}

/// The A/A floor of one (benchmark, metric, vCPUs, clock) from the per-boot
/// summaries `a` and `b` of two arms running the same kernel.
///
/// The change two arms of `k` boots show by chance is the difference of two
/// medians of `k` boots; under a normal boot-to-boot model with relative
/// spread `s` its standard deviation is about `s * sqrt(pi / k)` (the median of
/// `k` values has variance `pi/2 * s^2 / k`), so 95% of A/A comparisons stay
/// within `1.96 * s * sqrt(pi / k)`. With few boots `s` itself is uncertain:
/// the floor uses its one-sided 95% upper confidence bound
/// `s * sqrt((N - 1) / chi2_{0.05, N-1})` over all `N = |a| + |b|` boots (sd
/// taken around the pooled mean, so a shift between the arms counts as noise),
/// with `k = min(|a|, |b|)`; and it is never below the deviation actually observed.
///
/// `None` with fewer than 2 boots on a side, a non-finite value, or a zero median.
pub fn aa_floor(a: &[f64], b: &[f64]) -> Option<AaFloor> {
    if a.len() < 2 || b.len() < 2 || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let ma = median_in_place(&mut a.to_vec());
    let mb = median_in_place(&mut b.to_vec());
    let all: Vec<f64> = a.iter().chain(b).copied().collect();
    let center = median_in_place(&mut all.clone());
    if ma == 0.0 || center == 0.0 {
        return None;
    }
    let n = all.len() as f64;
    let mean = all.iter().sum::<f64>() / n;
    let sd = (all.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let spread = sd / center.abs();
    let chi = ChiSquared::new(n - 1.0)
        .ok()?
        .inverse_cdf(1.0 - SPREAD_UPPER_CONFIDENCE);
    let spread_upper = spread * ((n - 1.0) / chi).sqrt();
    let k = a.len().min(b.len()) as f64;
    let observed = (mb / ma - 1.0).abs();
    let floor = (Z_975 * spread_upper * (std::f64::consts::PI / k).sqrt()).max(observed);
    floor.is_finite().then_some(AaFloor {
        floor,
        observed,
        spread,
        spread_upper,
    })
}

/// The effect floor `T = max(2%, measured A/A floor)`; `None` (no A/A data) or a
/// non-finite value gives 2%.
pub fn effect_floor(measured: Option<f64>) -> f64 {
    match measured {
        Some(n) if n.is_finite() => n.max(MIN_EFFECT_FLOOR),
        _ => MIN_EFFECT_FLOOR,
    }
}
