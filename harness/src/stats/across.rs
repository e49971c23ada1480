//! One cell across two runs (last night against tonight) without pooling
//! their boots: each run's base is its own control.
//!
//! Two nights differ by more than their kernels — host load, thermal state,
//! another tenant, a firmware update — and that offset moves every boot of a
//! night together. Pooling two nights' boots as one sample reads the offset
//! as an effect (a 1% night offset called 34% of A/A cells at p ≤ 0.05).
//! Within one run the offset is common to base and variant, so the
//! variant-to-base ratio of each run carries none of it, and the change of
//! that ratio from run A to run B is the change a comparison can honestly
//! claim.
//!
//! The test is Welch's t on the log boot values: with `m` the mean of an
//! arm's `ln` values and `s²/n` its variance of the mean,
//! `D = (m_vB − m_bB) − (m_vA − m_bA)`, `se² = Σ s²/n` over the four arms,
//! the Welch–Satterthwaite degrees of freedom, a two-sided p from Student's
//! t, and the 95% interval `exp(D ± t₀.₉₇₅·se)` of the ratio of ratios.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::RatioCi;

/// A run's two arms of one cell, one value per boot.
#[derive(Debug, Clone, Copy, schemars::JsonSchema)]
pub struct Arms<'a> {
    /// Base boots.
    pub base: &'a [f64],
    /// Variant boots.
    pub variant: &'a [f64],
}

/// Run B's variant-to-base ratio against run A's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioOfRatios {
    /// `(variant_B / base_B) / (variant_A / base_A)` of the geometric means,
    /// with its 95% interval.
    pub ratio: RatioCi,
    /// Two-sided p of no change.
    pub p: f64,
}

/// Mean and variance of the mean of `ln x`; None below 2 values or for a
/// value that is not positive and finite.
fn log_mean_var(x: &[f64]) -> Option<(f64, f64, usize)> {
    if x.len() < 2 || x.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    let n = x.len() as f64;
    let logs: Vec<f64> = x.iter().map(|v| v.ln()).collect();
    let m = logs.iter().sum::<f64>() / n;
    let s2 = logs.iter().map(|l| (l - m) * (l - m)).sum::<f64>() / (n - 1.0);
    Some((m, s2 / n, x.len()))
}

/// The per-kernel night offset (relative sd) `compare` allows for on a wall
/// clock: a night effect of each kernel of its own, which the ratio of
/// ratios does not cancel (issue 29's review: at 0.25% and 0.5% and no
/// allowance, p ≤ 0.05 in 10% and 21% of A/A pairs). No wall-clock nights
/// have measured it yet; 0.5% is the larger of the review's two cases.
pub const WALL_NIGHT_SD: f64 = 0.005;
/// The same under the instruction-counting clock: the bound on a per-arm
/// run offset from recorded icount bisections (docs/reproduce.md), which
/// `bisect` allows for too.
pub const ICOUNT_NIGHT_SD: f64 = 0.0004;

/// B's ratio against A's (see the module text), allowing each of the four
/// arms a night offset of its own with relative sd `night_sd` (a known
/// variance: `4·night_sd²` added to `se²`, no degrees of freedom taken);
/// None when an arm has fewer than two boots or a value that is not
/// positive.
pub fn ratio_of_ratios(a: Arms, b: Arms, night_sd: f64) -> Option<RatioOfRatios> {
    let arms = [
        log_mean_var(b.variant)?,
        log_mean_var(b.base)?,
        log_mean_var(a.variant)?,
        log_mean_var(a.base)?,
    ];
    let d = arms[0].0 - arms[1].0 - (arms[2].0 - arms[3].0);
    let sampled: f64 = arms.iter().map(|a| a.1).sum();
    let tau2 = 4.0 * night_sd.ln_1p().powi(2);
    let se2 = sampled + tau2;
    if se2 <= 0.0 {
        return Some(exact(a, b, d));
    }
    let df_den = arms.iter().map(|a| a.1 * a.1 / (a.2 as f64 - 1.0)).sum::<f64>();
    let df = if df_den > 0.0 {
        se2 * se2 / df_den
    } else {
        f64::INFINITY
    };
    let se = se2.sqrt();
    let (sf, q) = tail(df, (d / se).abs())?;
    let mut p = (2.0 * sf).min(1.0);
    if sampled <= 0.0 && d != 0.0 {
        // no spread in any arm: never below what boots this few can show
        p = p.max(super::mwu::smallest_p(a.variant.len(), b.variant.len()));
    }
    let half = q * se;
    Some(RatioOfRatios {
        ratio: RatioCi {
            ratio: d.exp(),
            lo: (d - half).exp(),
            hi: (d + half).exp(),
        },
        p,
    })
}

/// Every arm on one value (a deterministic clock) and no night allowance:
/// the ratio is exact, but its p is what boots this few can give — the
/// exact Mann-Whitney p of the two runs' variant boots, each over its run's
/// base (all tied within a run) — never 0.
fn exact(a: Arms, b: Arms, d: f64) -> RatioOfRatios {
    let r = d.exp();
    let p = if d == 0.0 {
        1.0
    } else {
        super::mwu::smallest_p(a.variant.len(), b.variant.len())
    };
    RatioOfRatios {
        ratio: RatioCi { ratio: r, lo: r, hi: r },
        p,
    }
}

/// The upper tail at `x` and the 0.975 quantile of Student's t with `df`
/// degrees of freedom (the normal's for infinite `df`: only the known
/// allowance).
fn tail(df: f64, x: f64) -> Option<(f64, f64)> {
    if df.is_infinite() {
        let n = statrs::distribution::Normal::standard();
        return Some((n.sf(x), n.inverse_cdf(0.975)));
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((t.sf(x), t.inverse_cdf(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::mann_whitney_u;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn normal(rng: &mut ChaCha8Rng) -> f64 {
        let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random::<f64>());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// One night: `boots` per arm around 1000 × (1 + offset), boot sd
    /// `boot_sd`, each arm moved by a night effect of its own (sd
    /// `kernel_sd`), the variant `effect` away from base.
    fn night(
        rng: &mut ChaCha8Rng,
        boots: usize,
        boot_sd: f64,
        offset_sd: f64,
        kernel_sd: f64,
        effect: f64,
    ) -> (Vec<f64>, Vec<f64>) {
        let level = 1000.0 * (1.0 + offset_sd * normal(rng));
        let mut arm = |e: f64| {
            let own = 1.0 + kernel_sd * normal(rng);
            (0..boots)
                .map(|_| level * own * (1.0 + e) * (1.0 + boot_sd * normal(rng)))
                .collect::<Vec<f64>>()
        };
        (arm(0.0), arm(effect))
    }

    /// Two nights of one cell, B's variant `effect` away: the test allowing
    /// `allow` for a per-kernel night offset.
    fn pair(rng: &mut ChaCha8Rng, kernel_sd: f64, effect: f64, allow: f64) -> RatioOfRatios {
        let (ba, va) = night(rng, 7, 0.01, 0.01, kernel_sd, 0.0);
        let (bb, vb) = night(rng, 7, 0.01, 0.01, kernel_sd, effect);
        let arms = |base, variant| Arms { base, variant };
        ratio_of_ratios(arms(&ba, &va), arms(&bb, &vb), allow).unwrap()
    }

    #[test]
    fn an_exact_ratio_is_tested_exactly() {
        let a = Arms {
            base: &[100.0, 100.0],
            variant: &[99.0, 99.0],
        };
        let b = Arms {
            base: &[101.0, 101.0],
            variant: &[99.99, 99.99],
        };
        let r = ratio_of_ratios(a, b, 0.0).unwrap();
        assert!(
            (r.ratio.ratio - 1.0).abs() < 1e-12 && r.p == 1.0,
            "the night offset cancels: {r:?}"
        );
        // no spread anywhere and a 1% change: the exact test's p for 2 and 2
        // boots (2 / C(4, 2)), and for 5 and 5 (2 / C(10, 5)), never 0
        let moved = Arms {
            base: &[101.0, 101.0],
            variant: &[98.99, 98.99],
        };
        let r = ratio_of_ratios(a, moved, 0.0).unwrap();
        assert!((r.p - 1.0 / 3.0).abs() < 1e-12, "{r:?}");
        assert!((r.ratio.ratio - 0.99).abs() < 1e-4 && r.ratio.lo == r.ratio.hi, "{r:?}");
        let five = |x: f64| [x; 5];
        let (a5, a5v, b5, b5v) = (five(100.0), five(99.0), five(101.0), five(98.99));
        let r5 = ratio_of_ratios(
            Arms {
                base: &a5,
                variant: &a5v,
            },
            Arms {
                base: &b5,
                variant: &b5v,
            },
            0.0,
        )
        .unwrap();
        assert!((r5.p - 2.0 / 252.0).abs() < 1e-12, "{r5:?}");
        assert!(
            ratio_of_ratios(Arms { base: &[1.0], ..a }, b, 0.0).is_none(),
            "one boot has no spread"
        );
        assert!(ratio_of_ratios(Arms { base: &[1.0, 0.0], ..a }, b, 0.0).is_none());
    }

    /// Issue 21: A/A across nights with a 1% night offset (and 0.5/2%),
    /// 7 boots per arm, 1% boot spread: pooling both nights' variant boots
    /// into one Mann-Whitney reads the offset as an effect; the ratio of
    /// ratios keeps p ≤ 0.05 at about 5% of cells. The figures are quoted in
    /// docs/verdicts.md (`cargo test --lib across -- --nocapture`).
    #[test]
    fn aa_across_nights_is_called_at_the_tests_level() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        for offset in [0.005, 0.01, 0.02] {
            let (mut pooled, mut ratio, mut called, n) = (0, 0, 0, 2000);
            for _ in 0..n {
                let (ba, va) = night(&mut rng, 7, 0.01, offset, 0.0, 0.0);
                let (bb, vb) = night(&mut rng, 7, 0.01, offset, 0.0, 0.0);
                pooled += usize::from(mann_whitney_u(&va, &vb).unwrap().p <= 0.05);
                let r = ratio_of_ratios(
                    Arms {
                        base: &ba,
                        variant: &va,
                    },
                    Arms {
                        base: &bb,
                        variant: &vb,
                    },
                    0.0,
                )
                .unwrap();
                ratio += usize::from(r.p <= 0.05);
                called += usize::from(r.p <= 0.05 && (r.ratio.hi < 0.98 || r.ratio.lo > 1.02));
            }
            let pct = |k: usize| 100.0 * k as f64 / n as f64;
            eprintln!(
                "A/A across nights, {:.1}% night offset, 7 boots per arm, 1% boot spread: pooled boots p ≤ 0.05 in {:.1}%, ratio of ratios in {:.1}%, called beyond a 2% floor in {:.2}%",
                offset * 100.0,
                pct(pooled),
                pct(ratio),
                pct(called)
            );
            assert!(pct(ratio) <= 6.5, "{offset}: {}%", pct(ratio));
            assert!(pct(called) <= 1.0);
        }
    }

    /// The table of docs/verdicts.md ("Across nights"): A/A pairs of
    /// nights with a night effect of each kernel of its own, and a real 3%
    /// drop, tested without an allowance and with `compare`'s wall-clock
    /// one (7 boots per arm, 1% boot spread, 1% common night offset, 2,000
    /// pairs per cell, seeded). `cargo test --lib across -- --nocapture`.
    #[test]
    fn per_kernel_night_effects_are_allowed_for() {
        let header = "| per-kernel night sd | allowed for | A/A: p ≤ 0.05 | A/A: called | 3% drop: p ≤ 0.05, below 1 | 3% drop: called regressed |";
        let n = 2000;
        let mut rows = vec![];
        for (k, kernel_sd) in [0.0, 0.0025, 0.005].into_iter().enumerate() {
            for allow in [0.0, WALL_NIGHT_SD] {
                let mut rng = ChaCha8Rng::seed_from_u64(2900 + k as u64);
                let (mut aa_p, mut aa_called, mut seen, mut called) = (0, 0, 0, 0);
                for _ in 0..n {
                    let r = pair(&mut rng, kernel_sd, 0.0, allow);
                    aa_p += usize::from(r.p <= 0.05);
                    aa_called += usize::from(r.p <= 0.05 && (r.ratio.hi < 0.98 || r.ratio.lo > 1.02));
                    let r = pair(&mut rng, kernel_sd, -0.03, allow);
                    seen += usize::from(r.p <= 0.05 && r.ratio.hi < 1.0);
                    called += usize::from(r.p <= 0.05 && r.ratio.hi < 0.98);
                }
                let pct = |c: usize| format!("{:.1}%", 100.0 * c as f64 / n as f64);
                rows.push(format!(
                    "| {}% | {}% | {} | {} | {} | {} |",
                    kernel_sd * 100.0,
                    allow * 100.0,
                    pct(aa_p),
                    pct(aa_called),
                    pct(seen),
                    pct(called)
                ));
                if allow == WALL_NIGHT_SD {
                    // allowed for, the level holds up to the allowance
                    assert!(aa_p * 100 <= n * 6, "{kernel_sd}: A/A p ≤ 0.05 in {aa_p}/{n}");
                } else if kernel_sd >= 0.005 {
                    // not allowed for, it does not (the review's 21%)
                    assert!(aa_p * 100 >= n * 12, "{kernel_sd}: A/A p ≤ 0.05 in {aa_p}/{n}");
                }
                // the floor's real power for a 3% drop is low
                assert!(called * 2 < n, "{called}/{n}");
            }
        }
        crate::testutil::assert_doc_table("verdicts.md", header, &rows);
    }

    /// A deterministic clock with an allowance: no spread in any arm, yet
    /// the interval is as wide as the allowance and p is never 0.
    #[test]
    fn zero_spread_arms_with_an_allowance_keep_an_interval() {
        let arms = |base, variant| Arms { base, variant };
        let (a_b, a_v, b_b, b_v) = ([100.0; 3], [100.0; 3], [100.0; 3], [90.0; 3]);
        let r = ratio_of_ratios(arms(&a_b, &a_v), arms(&b_b, &b_v), ICOUNT_NIGHT_SD).unwrap();
        assert!(r.p > 0.0 && r.p >= crate::stats::mwu::smallest_p(3, 3) - 1e-15, "{r:?}");
        assert!(r.ratio.lo < 0.9 && r.ratio.hi > 0.9 && r.ratio.hi < 0.91, "{r:?}");
        // a change inside the allowance is not significant
        let (b_v2,) = ([99.97; 3],);
        let r = ratio_of_ratios(arms(&a_b, &a_v), arms(&b_b, &b_v2), ICOUNT_NIGHT_SD).unwrap();
        assert!(r.p > 0.05, "{r:?}");
    }
}
