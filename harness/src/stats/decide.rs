//! The decision rule: from per-boot summaries of two cells to a verdict.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::bootstrap::{bootstrap_ratio_of_medians, RatioCi};
use super::descriptive::{mad, median_in_place};
use super::fdr::benjamini_hochberg;
use super::fisher::fisher_greater;
use super::floor::MIN_EFFECT_FLOOR;
use super::mwu::{mann_whitney_u, smallest_p};

/// Consistency constant turning a MAD into a standard deviation for normal data.
const MAD_TO_SIGMA: f64 = 1.4826;

/// Power at which [`minimum_detectable_effect`] is computed.
const MDE_POWER: f64 = 0.8;

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
    /// Significant and the whole CI lies inside the floor: real but below the floor.
    Small,
    /// Significant, and the CI straddles the floor: part inside, part beyond. Needs
    /// more boots to tell a small change from one beyond the floor.
    Unsure,
    /// The new variant failed (a failed or timed-out repetition, a failed or hung
    /// boot) in a larger share of its boots than base.
    FailsMore,
    /// Too few boots (fewer than `min_boots` on a side) or unusable data.
    Insufficient,
    /// The two arms did different amounts of their benchmark's unit of work
    /// per op (its kernel profile's calls per op differ beyond their noise):
    /// under this clock a rate or a per-op count then measures how the op
    /// was filled, not what the code costs, so the cell is not called
    /// (`Decision::work` holds the calls per op).
    #[serde(rename = "work_differs")]
    WorkDiffers,
}

impl Verdict {
    /// Short label for tables: `"regressed"`, `"improved"`, `"~"`, `"≈"`, `"small"`,
    /// `"unsure"`, `"fails more"`, `"?"`.
    pub fn symbol(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NotSignificant => "~",
            Verdict::Equivalent => "≈",
            Verdict::Small => "small",
            Verdict::Unsure => "unsure",
            Verdict::FailsMore => "fails more",
            Verdict::Insufficient => "?",
            Verdict::WorkDiffers => "not comparable",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.symbol())
    }
}

/// Boots of one cell that failed for its benchmark, against base's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failures {
    /// New variant: boots that failed the benchmark.
    pub failed: usize,
    /// New variant: boots that ended.
    pub of: usize,
    /// Base: boots that failed the benchmark.
    pub base_failed: usize,
    /// Base: boots that ended.
    pub base_of: usize,
}

/// The failure-rate comparison of a cell whose new variant fails more often.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FailureRate {
    /// The counts.
    pub counts: Failures,
    /// One-sided Fisher exact p that the new variant fails more often.
    pub p: f64,
    /// Its Benjamini-Hochberg q over the failure tests of the same call
    /// (every cell with boots on both sides; a cell repeated per metric
    /// counts once per metric, which leaves BH's q unchanged).
    #[serde(default)]
    pub q: f64,
    /// `q <= alpha`.
    pub significant: bool,
}

/// One comparison to decide: per-boot summaries of base and of the new variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Base: one value per boot.
    pub base: Vec<f64>,
    /// New variant: one value per boot.
    pub new: Vec<f64>,
    /// Direction of the metric.
    pub higher_is_better: bool,
    /// This cell's floor (e.g. its calibrated A/A floor); the rule's floor is the least.
    pub floor: f64,
    /// Failed boots on both sides, if known.
    pub failures: Option<Failures>,
    /// Boots whose benchmark timed out or hung, without a value (base, new):
    /// they rank worst in the test instead of leaving it silently.
    pub worst: (usize, usize),
}

impl Comparison {
    /// A comparison with the rule's floor and no failure counts.
    pub fn new(base: Vec<f64>, new: Vec<f64>, higher_is_better: bool) -> Comparison {
        Comparison {
            base,
            new,
            higher_is_better,
            floor: 0.0,
            failures: None,
            worst: (0, 0),
        }
    }
}

/// A benchmark's unit-of-work calls per op in base's and the new variant's
/// kernel profiles (medians over boots).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkCalls {
    /// Base.
    pub base: f64,
    /// New variant.
    pub new: f64,
}

/// The verdict for one cell and the numbers behind it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// The verdict of the measurements alone (equal to `verdict` unless that is
    /// `FailsMore`, when it judges the boots that did finish).
    pub performance: Verdict,
    /// `median(new) / median(base)` of the boot summaries with its bootstrap 95% CI;
    /// `None` when insufficient.
    pub ratio: Option<RatioCi>,
    /// Two-sided Mann-Whitney U p-value over boots; `None` when insufficient.
    pub p: Option<f64>,
    /// Benjamini-Hochberg q-value across all sufficient cells of the call; `None` when
    /// insufficient.
    pub q: Option<f64>,
    /// Number of base boots.
    pub n_base: usize,
    /// Number of new boots.
    pub n_new: usize,
    /// Minimal detectable effect, `max(floor, power-based mde at alpha_eff)` (see
    /// [`minimum_detectable_effect`]). `None` when insufficient.
    pub mde: Option<f64>,
    /// The change a `regressed` call can detect at this cell's sampling: the
    /// size a true change must have to be called regressed 80% of the time
    /// when it is the only change among the report's comparisons (see
    /// [`detectable_change`]); `None` when insufficient or when these boots
    /// can never be called (their smallest p is above `alpha / m`).
    pub detectable: Option<f64>,
    /// The relative spread of one boot value ([`relative_spread`]), from
    /// which `detectable` is computed; `None` when insufficient.
    pub spread: Option<f64>,
    /// The per-test level this cell had to meet: `alpha * (R + 1) / m` for a cell
    /// that did not pass (R cells passed BH among m), `alpha * R / m` for one that did.
    pub alpha_eff: Option<f64>,
    /// The smallest p Mann-Whitney can give with these boot counts.
    pub smallest_p: Option<f64>,
    /// Effect floor the verdict used (a fraction, e.g. 0.02).
    pub floor: f64,
    /// Direction of the metric the verdict used.
    pub higher_is_better: bool,
    /// Set when the new variant fails more often than base.
    pub failures: Option<FailureRate>,
    /// The unit of work's calls per op, base and new, when they differ
    /// beyond their noise and the verdict is [`Verdict::WorkDiffers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<WorkCalls>,
}

impl Decision {
    /// The cell's arms did `work` unit-of-work calls per op apart: its
    /// measurement verdict becomes [`Verdict::WorkDiffers`] (and so its
    /// verdict, unless that is `FailsMore` or `Insufficient`).
    pub fn work_differs(&mut self, work: WorkCalls) {
        if self.performance == Verdict::Insufficient {
            return;
        }
        self.work = Some(work);
        self.performance = Verdict::WorkDiffers;
        if self.verdict != Verdict::FailsMore {
            self.verdict = Verdict::WorkDiffers;
        }
    }

    /// The change as a signed "worse by" fraction with its interval:
    /// `(worse, lo, hi)`, positive when the new variant is worse whatever the
    /// metric's direction (`1 - ratio` for throughput, `ratio - 1` for latency).
    pub fn worse_by(&self) -> Option<(f64, f64, f64)> {
        let r = self.ratio?;
        Some(if self.higher_is_better {
            (1.0 - r.ratio, 1.0 - r.hi, 1.0 - r.lo)
        } else {
            (r.ratio - 1.0, r.lo - 1.0, r.hi - 1.0)
        })
    }

    /// The change's interval reaches beyond the floor on the worse side.
    pub fn may_regress(&self) -> bool {
        self.worse_by().is_some_and(|(_, _, hi)| hi > self.floor)
    }
}

/// The decision rule; printed with every report so the verdicts can be recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rule {
    /// Significance level for the BH q-value (default 0.05).
    pub alpha: f64,
    /// Least effect floor as a fraction (default 0.02); a cell's own floor may be larger.
    pub floor: f64,
    /// Minimum number of boots per side, else `?` (default 3, the least for which
    /// the two-sided Mann-Whitney test can give p = 0.1).
    pub min_boots: usize,
    /// Bootstrap resamples for the ratio CI (default 10000).
    pub resamples: usize,
    /// Seed for the bootstrap generator; every cell uses this same seed.
    pub seed: u64,
}

impl Default for Rule {
    /// `alpha = 0.05`, `floor = 0.02`, `min_boots = 3`, `resamples = 10000`,
    /// `seed = 0x5EED_5747` (any fixed value works; print it with the report).
    fn default() -> Self {
        Rule {
            alpha: 0.05,
            floor: MIN_EFFECT_FLOOR,
            min_boots: 3,
            resamples: 10_000,
            seed: 0x5EED_5747,
        }
    }
}

/// Test and interval of one sufficient cell, before the BH pass.
struct Tested {
    p: f64,
    ratio: RatioCi,
}

fn test_cell(c: &Comparison, rule: &Rule) -> Option<Tested> {
    let min_n = rule.min_boots.max(1);
    if c.base.len() < min_n || c.new.len() < min_n {
        return None;
    }
    let ratio = bootstrap_ratio_of_medians(&c.base, &c.new, rule.resamples, rule.seed)?;
    let (base, new) = with_worst(c);
    let mw = mann_whitney_u(&base, &new)?;
    Some(Tested { p: mw.p, ratio })
}

/// Both sides with their timed-out boots added as a value worse than every
/// measured one (ranks are all the test reads; the interval keeps only
/// measured boots).
fn with_worst(c: &Comparison) -> (Vec<f64>, Vec<f64>) {
    let all = c.base.iter().chain(&c.new);
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    let worst = if c.higher_is_better {
        lo - 1.0 - lo.abs()
    } else {
        hi + 1.0 + hi.abs()
    };
    let pad = |v: &[f64], k: usize| {
        v.iter()
            .copied()
            .chain(std::iter::repeat_n(worst, k))
            .collect::<Vec<f64>>()
    };
    (pad(&c.base, c.worst.0), pad(&c.new, c.worst.1))
}

/// Decides every cell of a report.
///
/// Each value of a [`Comparison`] is one boot's summary: the boot is the unit.
/// A cell is insufficient (`?`) when either side has fewer than `rule.min_boots`
/// boots, holds a non-finite value, or has a zero base median. For every other cell
/// this computes the two-sided Mann-Whitney p ([`mann_whitney_u`]) and the bootstrap
/// ratio CI ([`bootstrap_ratio_of_medians`] with `rule.resamples` and `rule.seed`);
/// then the BH q-values over the p-values of all sufficient cells of this call; then,
/// with `T = max(rule.floor, cell floor)`, the verdict of [`classify`] and the
/// [`minimum_detectable_effect`] at the level the cell had to meet, never below `T`.
///
/// A cell whose failure share (`failed / of`) exceeds base's carries its
/// one-sided Fisher exact p ([`fisher_greater`]) in `failures`, with its
/// BH q over every cell's Fisher test of this call; it is `FailsMore`
/// whatever its measurements say (those stay in `performance`) only when
/// that q is at most `rule.alpha`. Boots whose benchmark timed out
/// (`worst`) rank below every measured boot in the Mann-Whitney test.
pub fn decide_all(cells: &[Comparison], rule: &Rule) -> Vec<Decision> {
    let tested: Vec<Option<Tested>> = cells.iter().map(|c| test_cell(c, rule)).collect();
    let (qs, counts) = bh_pass(tested.iter().map(|t| t.as_ref().map(|t| t.p)), rule);
    let failure_ps = cells.iter().map(|c| c.failures.and_then(fisher_p));
    let (failure_qs, _) = bh_pass(failure_ps, rule);
    cells
        .iter()
        .zip(tested)
        .zip(qs)
        .zip(failure_qs)
        .map(|(((c, t), q), fq)| decide_one(c, t, q, fq, rule, counts))
        .collect()
}

/// The one-sided Fisher p that the new variant fails more often, where
/// both sides had boots.
fn fisher_p(f: Failures) -> Option<f64> {
    (f.of > 0 && f.base_of > 0).then(|| fisher_greater(f.failed, f.of, f.base_failed, f.base_of))
}

/// The one BH pass of a call: each cell's q (NaN where untested) and
/// (cells that passed, cells tested).
fn bh_pass(ps: impl Iterator<Item = Option<f64>>, rule: &Rule) -> (Vec<f64>, (usize, usize)) {
    let ps: Vec<f64> = ps.map(|p| p.unwrap_or(f64::NAN)).collect();
    let qs = benjamini_hochberg(&ps);
    let m = qs.iter().filter(|q| q.is_finite()).count();
    let passed = qs.iter().filter(|&&q| q <= rule.alpha).count();
    (qs, (passed, m))
}

/// A cell tested elsewhere (across two runs, see [`super::across`]): its p
/// and ratio interval, decided under the same rule as [`decide_all`]'s cells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pretested {
    /// Two-sided p of no change.
    pub p: f64,
    /// The change as a ratio with its 95% interval.
    pub ratio: RatioCi,
    /// The cell's floor (the rule's floor is the least).
    pub floor: f64,
    /// Direction of the metric.
    pub higher_is_better: bool,
    /// Boots behind the "before" side.
    pub n_base: usize,
    /// Boots behind the "after" side.
    pub n_new: usize,
}

/// Decides pretested cells (None: not testable, `?`) with one BH pass over
/// them; no minimum detectable effect is computed for them.
pub fn decide_pretested(cells: &[Option<Pretested>], rule: &Rule) -> Vec<Decision> {
    let (qs, (passed, m)) = bh_pass(cells.iter().map(|c| c.map(|c| c.p)), rule);
    cells
        .iter()
        .zip(qs)
        .map(|(c, q)| {
            let shell = Comparison {
                base: Vec::new(),
                new: Vec::new(),
                higher_is_better: c.is_some_and(|c| c.higher_is_better),
                floor: c.map_or(0.0, |c| c.floor),
                failures: None,
                worst: (0, 0),
            };
            let mut d = decide_one(
                &shell,
                c.map(|c| Tested { p: c.p, ratio: c.ratio }),
                q,
                f64::NAN,
                rule,
                (passed, m),
            );
            d.n_base = c.map_or(0, |c| c.n_base);
            d.n_new = c.map_or(0, |c| c.n_new);
            d.smallest_p = None;
            d
        })
        .collect()
}

fn decide_one(
    c: &Comparison,
    t: Option<Tested>,
    q: f64,
    failure_q: f64,
    rule: &Rule,
    (passed, m): (usize, usize),
) -> Decision {
    let floor = c.floor.max(rule.floor);
    let mut d = Decision {
        verdict: Verdict::Insufficient,
        performance: Verdict::Insufficient,
        ratio: None,
        p: None,
        q: None,
        n_base: c.base.len(),
        n_new: c.new.len(),
        mde: None,
        detectable: None,
        spread: None,
        alpha_eff: None,
        smallest_p: None,
        floor,
        higher_is_better: c.higher_is_better,
        failures: c.failures.and_then(|f| fails_more(f, failure_q, rule.alpha)),
        work: None,
    };
    if let Some(t) = t {
        let significant = q <= rule.alpha;
        let alpha_eff = rule.alpha * (if significant { passed } else { passed + 1 }).max(1) as f64 / m.max(1) as f64;
        d.performance = classify(q, &t.ratio, floor, rule.alpha, c.higher_is_better);
        d.ratio = Some(t.ratio);
        d.p = Some(t.p);
        d.q = Some(q);
        d.alpha_eff = Some(alpha_eff);
        d.smallest_p = Some(smallest_p(c.base.len(), c.new.len()));
        d.mde = minimum_detectable_effect(&c.base, &c.new, alpha_eff).map(|x| x.max(floor));
        let lone = rule.alpha / m.max(1) as f64;
        d.spread = relative_spread(&c.base, &c.new);
        d.detectable = d
            .spread
            .and_then(|s| detectable_change(s, (c.base.len(), c.new.len()), floor, lone));
    }
    // "fails more" is the headline only when Fisher's p says so; a larger
    // failure share without significance is shown as "fails more?"
    d.verdict = if d.failures.is_some_and(|f| f.significant) {
        Verdict::FailsMore
    } else {
        d.performance
    };
    d
}

fn fails_more(f: Failures, q: f64, alpha: f64) -> Option<FailureRate> {
    let worse = f.failed * f.base_of > f.base_failed * f.of;
    fisher_p(f).filter(|_| worse).map(|p| FailureRate {
        counts: f,
        p,
        q,
        significant: q <= alpha,
    })
}

/// The verdict of one tested cell from its q-value and ratio CI, with
/// `significant = q <= alpha` and the floor `T`:
///
/// * significant and CI wholly beyond `T` in the bad direction → `Regressed`
///   (higher-is-better: `hi < 1 - T`; lower-is-better: `lo > 1 + T`);
/// * significant and CI wholly beyond `T` in the good direction → `Improved`;
/// * significant and CI wholly inside `[1 - T, 1 + T]` → `Small`;
/// * significant otherwise (the CI straddles `1 - T` or `1 + T`) → `Unsure`;
/// * not significant and CI inside `[1 - T, 1 + T]` → `Equivalent`;
/// * not significant otherwise → `NotSignificant`.
pub fn classify(q: f64, ci: &RatioCi, floor: f64, alpha: f64, higher_is_better: bool) -> Verdict {
    let significant = q <= alpha;
    let above = ci.lo > 1.0 + floor; // whole CI beyond the floor, upwards
    let below = ci.hi < 1.0 - floor; // whole CI beyond the floor, downwards
    let inside = ci.lo >= 1.0 - floor && ci.hi <= 1.0 + floor;
    match (significant, above, below, inside) {
        (true, true, _, _) if higher_is_better => Verdict::Improved,
        (true, _, true, _) if !higher_is_better => Verdict::Improved,
        (true, true, _, _) | (true, _, true, _) => Verdict::Regressed,
        (true, _, _, true) => Verdict::Small,
        (true, _, _, _) => Verdict::Unsure,
        (false, _, _, true) => Verdict::Equivalent,
        (false, _, _, _) => Verdict::NotSignificant,
    }
}

/// Smallest relative change of the median that this cell could have detected, as a
/// fraction of `|median(base)|`, at two-sided level `alpha` with 80% power, counting
/// the values given (with the boot as the unit: boots, not repetitions):
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
    let sigma = relative_spread(base, new)?;
    test_mde(sigma, (base.len(), new.len()), alpha)
}

/// The pooled robust spread of one boot value relative to `|median(base)|`
/// (as [`minimum_detectable_effect`] describes); `None` when a side has
/// fewer than 2 values, a value is not finite, or the base median is 0.
pub fn relative_spread(base: &[f64], new: &[f64]) -> Option<f64> {
    if base.len() < 2 || new.len() < 2 || base.iter().chain(new).any(|x| !x.is_finite()) {
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
    let sigma = ((spread(base).powi(2) + spread(new).powi(2)) / 2.0).sqrt() / med_base.abs();
    sigma.is_finite().then_some(sigma)
}

/// The test's minimum detectable effect for a relative spread `sigma` and
/// `(nb, nn)` boots at two-sided level `alpha` (the formula of
/// [`minimum_detectable_effect`]).
fn test_mde(sigma: f64, (nb, nn): (usize, usize), alpha: f64) -> Option<f64> {
    if nb < 2 || nn < 2 || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let df = (nb + nn - 2) as f64;
    let (za, zb) = match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => (t.inverse_cdf(1.0 - alpha / 2.0), t.inverse_cdf(MDE_POWER)),
        Err(_) => {
            let z = Normal::standard();
            (z.inverse_cdf(1.0 - alpha / 2.0), z.inverse_cdf(MDE_POWER))
        }
    };
    let are = (std::f64::consts::PI / 3.0).sqrt();
    let mde = (za + zb) * (1.0 / nb as f64 + 1.0 / nn as f64).sqrt() * are * sigma;
    mde.is_finite().then_some(mde)
}

/// The change a `regressed` call detects 80% of the time, for boot values
/// of relative spread `sigma`, `(nb, nn)` boots, threshold `threshold` and
/// a test that must reach `alpha_test` (for one changed cell among `m`,
/// `alpha / m`). Both conditions of the call must hold, so it is the larger
/// of: the threshold plus the distance the interval's near end keeps from
/// the estimate, `(z_0.975 + z_0.8) · sqrt(pi/2) · sigma · sqrt(1/nb + 1/nn)`
/// (a median's standard error is `sqrt(pi/2)` times a mean's), and the
/// test's own [`minimum_detectable_effect`] at `alpha_test`. `None` when
/// these boots can never reach `alpha_test` ([`smallest_p`]).
pub fn detectable_change(sigma: f64, (nb, nn): (usize, usize), threshold: f64, alpha_test: f64) -> Option<f64> {
    if nb < 2 || nn < 2 || smallest_p(nb, nn) > alpha_test {
        return None;
    }
    let z = Normal::standard();
    let se = (std::f64::consts::PI / 2.0).sqrt() * sigma * (1.0 / nb as f64 + 1.0 / nn as f64).sqrt();
    let by_interval = threshold + (z.inverse_cdf(0.975) + z.inverse_cdf(MDE_POWER)) * se;
    Some(by_interval.max(test_mde(sigma, (nb, nn), alpha_test)?))
}

fn sample_sd(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}
