//! The decision rule: from per-cell samples to a verdict.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::bootstrap::{bootstrap_ratio_of_medians, RatioCi};
use super::descriptive::{mad, median_in_place, quantile_sorted};
use super::fdr::benjamini_hochberg;
use super::mwu::mann_whitney_u;

/// The smallest effect floor ever used: changes below 2% are never called regressions.
pub const MIN_EFFECT_FLOOR: f64 = 0.02;

/// Consistency constant turning a MAD into a standard deviation for normal data.
const MAD_TO_SIGMA: f64 = 1.4826;

/// Power at which [`minimum_detectable_effect`] is computed.
const MDE_POWER: f64 = 0.8;

/// Quantile of the A/A deviations used by [`noise_floor`].
const NOISE_QUANTILE: f64 = 0.95;

/// Outcome of comparing one cell (`new` against `base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Significant (q <= alpha) and the whole ratio CI lies beyond the floor in the bad
    /// direction.
    Regressed,
    /// Significant and the whole ratio CI lies beyond the floor in the good direction.
    Improved,
    /// Not significant and the CI is not inside the floor: no conclusion (see `mde`).
    NotSignificant,
    /// Not significant and the whole CI lies inside `[1 - floor, 1 + floor]`.
    Equivalent,
    /// Significant, but the CI is not wholly beyond the floor: real but small (or unsure).
    Small,
    /// Too few samples (fewer than `min_samples` on a side) or unusable data.
    Insufficient,
}

impl Verdict {
    /// Short symbol for tables: `"regressed"`, `"improved"`, `"~"`, `"≈"`, `"small"`, `"?"`.
    pub fn symbol(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NotSignificant => "~",
            Verdict::Equivalent => "≈",
            Verdict::Small => "small",
            Verdict::Insufficient => "?",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.symbol())
    }
}

/// The verdict for one cell and the numbers behind it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// `median(new) / median(base)` with its bootstrap 95% CI; `None` when insufficient.
    pub ratio: Option<RatioCi>,
    /// Two-sided Mann-Whitney U p-value; `None` when insufficient.
    pub p: Option<f64>,
    /// Benjamini-Hochberg q-value across all sufficient cells of the call; `None` when
    /// insufficient.
    pub q: Option<f64>,
    /// Number of base samples.
    pub n_base: usize,
    /// Number of new samples.
    pub n_new: usize,
    /// Minimal detectable effect as a fraction of the base median (see
    /// [`minimum_detectable_effect`]); computed for every sufficient cell, most useful
    /// next to `~`. `None` when insufficient.
    pub mde: Option<f64>,
    /// Effect floor the verdict used (a fraction, e.g. 0.02).
    pub floor: f64,
    /// Direction of the metric the verdict used.
    pub higher_is_better: bool,
}

/// The decision rule; printed with every report so the verdicts can be recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Significance level for the BH q-value (default 0.05).
    pub alpha: f64,
    /// Effect floor as a fraction (default 0.02); normally `effect_floor(noise)`.
    pub floor: f64,
    /// Minimum number of samples per side, else `?` (default 4, the least for which
    /// the two-sided Mann-Whitney test can reach p < 0.05).
    pub min_samples: usize,
    /// Bootstrap resamples for the ratio CI (default 10000).
    pub resamples: usize,
    /// Seed for the bootstrap generator; every cell uses this same seed.
    pub seed: u64,
}

impl Default for Rule {
    /// `alpha = 0.05`, `floor = 0.02`, `min_samples = 4`, `resamples = 10000`,
    /// `seed = 0x5EED_5747` (any fixed value works; print it with the report).
    fn default() -> Self {
        Rule {
            alpha: 0.05,
            floor: MIN_EFFECT_FLOOR,
            min_samples: 4,
            resamples: 10_000,
            seed: 0x5EED_5747,
        }
    }
}

/// Decides every cell of a report.
///
/// Each cell is `(base samples, new samples, higher_is_better)`. A cell is insufficient
/// (`?`) when either side has fewer than `rule.min_samples` (at least 1) samples, holds a
/// non-finite value, or has a zero base median. For every other cell this computes the
/// two-sided Mann-Whitney p ([`mann_whitney_u`]), the bootstrap ratio CI
/// ([`bootstrap_ratio_of_medians`] with `rule.resamples` and `rule.seed`) and the
/// [`minimum_detectable_effect`]; then the BH q-values over the p-values of all sufficient
/// cells of this call (insufficient cells are not part of the family); then the verdict,
/// with `T = rule.floor` and `significant = q <= rule.alpha`:
///
/// * significant and CI wholly beyond `T` in the bad direction → `Regressed`
///   (higher-is-better: `hi < 1 - T`; lower-is-better: `lo > 1 + T`);
/// * significant and CI wholly beyond `T` in the good direction → `Improved`;
/// * significant otherwise → `Small`;
/// * not significant and `1 - T <= lo` and `hi <= 1 + T` → `Equivalent`;
/// * not significant otherwise → `NotSignificant`.
///
/// The result has one [`Decision`] per cell, in order.
pub fn decide_all(cells: &[(Vec<f64>, Vec<f64>, bool)], rule: &Rule) -> Vec<Decision> {
    let min_n = rule.min_samples.max(1);
    let floor = rule.floor;
    struct Partial {
        p: f64,
        ratio: RatioCi,
        mde: Option<f64>,
    }
    let partial: Vec<Option<Partial>> = cells
        .iter()
        .map(|(base, new, _)| {
            if base.len() < min_n || new.len() < min_n {
                return None;
            }
            let mw = mann_whitney_u(base, new)?;
            let ratio = bootstrap_ratio_of_medians(base, new, rule.resamples, rule.seed)?;
            let mde = minimum_detectable_effect(base, new, rule.alpha);
            Some(Partial {
                p: mw.p,
                ratio,
                mde,
            })
        })
        .collect();
    let ps: Vec<f64> = partial
        .iter()
        .map(|c| c.as_ref().map_or(f64::NAN, |c| c.p))
        .collect();
    let qs = benjamini_hochberg(&ps);

    cells
        .iter()
        .zip(partial)
        .zip(qs)
        .map(|(((base, new, higher_is_better), part), q)| {
            let mut d = Decision {
                verdict: Verdict::Insufficient,
                ratio: None,
                p: None,
                q: None,
                n_base: base.len(),
                n_new: new.len(),
                mde: None,
                floor,
                higher_is_better: *higher_is_better,
            };
            if let Some(part) = part {
                d.verdict = verdict(q, &part.ratio, floor, rule.alpha, *higher_is_better);
                d.ratio = Some(part.ratio);
                d.p = Some(part.p);
                d.q = Some(q);
                d.mde = part.mde;
            }
            d
        })
        .collect()
}

/// The verdict for one sufficient cell (see [`decide_all`]).
fn verdict(q: f64, ci: &RatioCi, floor: f64, alpha: f64, higher_is_better: bool) -> Verdict {
    let significant = q <= alpha;
    let above = ci.lo > 1.0 + floor; // whole CI beyond the floor, upwards
    let below = ci.hi < 1.0 - floor; // whole CI beyond the floor, downwards
    if significant {
        match (above, below, higher_is_better) {
            (true, _, true) | (_, true, false) => Verdict::Improved,
            (true, _, false) | (_, true, true) => Verdict::Regressed,
            _ => Verdict::Small,
        }
    } else if ci.lo >= 1.0 - floor && ci.hi <= 1.0 + floor {
        Verdict::Equivalent
    } else {
        Verdict::NotSignificant
    }
}

/// Smallest relative change of the median that this cell could have detected, as a
/// fraction of `|median(base)|`, at two-sided level `alpha` with 80% power:
///
/// `mde = (t_{1-alpha/2} + t_{0.8}) * sqrt(1/n_base + 1/n_new) * sqrt(pi/3) * sigma / |median(base)|`
///
/// where `t` are Student-t quantiles with `n_base + n_new - 2` degrees of freedom (the
/// usual two-sample power formula), `sqrt(pi/3)` converts it to the Mann-Whitney test
/// (asymptotic relative efficiency 3/pi against the t-test under normality), and
/// `sigma = sqrt((s_base^2 + s_new^2) / 2)` pools the robust spreads `s = 1.4826 * MAD`
/// of the two sides (the sample standard deviation replaces a side's MAD when it is 0).
/// For 10 vs 10 this gives ~1.36 sigma, for 20 vs 20 ~0.93 sigma, close to the design's
/// "80% power at ~1.4 sigma (n=10), ~1.0 sigma (n=20)".
///
/// Returns `None` when a side has fewer than 2 samples, holds a non-finite value, the
/// base median is 0, or `alpha` is not in `(0, 1)`.
pub fn minimum_detectable_effect(base: &[f64], new: &[f64], alpha: f64) -> Option<f64> {
    let (nb, nn) = (base.len(), new.len());
    if nb < 2
        || nn < 2
        || !(alpha > 0.0 && alpha < 1.0)
        || base.iter().chain(new).any(|x| !x.is_finite())
    {
        return None;
    }
    let mut buf = base.to_vec();
    let med_base = median_in_place(&mut buf);
    if med_base == 0.0 {
        return None;
    }
    let spread = |xs: &[f64]| {
        let s = MAD_TO_SIGMA * mad(xs);
        if s > 0.0 {
            s
        } else {
            sample_sd(xs)
        }
    };
    let sigma = ((spread(base).powi(2) + spread(new).powi(2)) / 2.0).sqrt();
    let df = (nb + nn - 2) as f64;
    let (za, zb) = match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => (t.inverse_cdf(1.0 - alpha / 2.0), t.inverse_cdf(MDE_POWER)),
        Err(_) => {
            let z = Normal::standard();
            (z.inverse_cdf(1.0 - alpha / 2.0), z.inverse_cdf(MDE_POWER))
        }
    };
    let are = (std::f64::consts::PI / 3.0).sqrt();
    let mde = (za + zb) * (1.0 / nb as f64 + 1.0 / nn as f64).sqrt() * are * sigma / med_base.abs();
    mde.is_finite().then_some(mde)
}

fn sample_sd(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// Noise floor measured from A/A comparisons (the same kernel measured as "base" and as
/// "new", ideally in separate boots, exactly as real comparisons are run).
///
/// For every pair whose two sides both have at least `min_samples` (at least 1) finite
/// samples and a non-zero base median, take the deviation `|median(new)/median(base) - 1|`
/// of the point ratio; the floor is the 95th percentile of those deviations (linear
/// interpolation; with fewer than ~20 pairs this is close to the largest deviation).
///
/// Why the point ratio and not the bootstrap CI: the CI already carries the within-cell
/// sampling uncertainty into every verdict; what the floor must add is the systematic
/// boot-to-boot and run-to-run shift that no within-cell CI sees, and that is what A/A
/// point ratios show. It also needs no random numbers.
///
/// Returns 0.0 when no pair is usable, so that [`effect_floor`] falls back to 2%.
pub fn noise_floor(aa_pairs: &[(Vec<f64>, Vec<f64>)], min_samples: usize) -> f64 {
    let min_n = min_samples.max(1);
    let mut devs: Vec<f64> = aa_pairs
        .iter()
        .filter(|(a, b)| a.len() >= min_n && b.len() >= min_n)
        .filter(|(a, b)| a.iter().chain(b).all(|x| x.is_finite()))
        .filter_map(|(a, b)| {
            let ma = median_in_place(&mut a.clone());
            let mb = median_in_place(&mut b.clone());
            (ma != 0.0).then(|| (mb / ma - 1.0).abs())
        })
        .collect();
    if devs.is_empty() {
        return 0.0;
    }
    devs.sort_by(f64::total_cmp);
    quantile_sorted(&devs, NOISE_QUANTILE)
}

/// The effect floor `T = max(2%, measured A/A noise)`; `None` (no A/A data) or a
/// non-finite noise gives 2%.
pub fn effect_floor(measured_noise: Option<f64>) -> f64 {
    match measured_noise {
        Some(n) if n.is_finite() => n.max(MIN_EFFECT_FLOOR),
        _ => MIN_EFFECT_FLOOR,
    }
}
