//! The gate's pre-planned second stage of boots (pure): which cells an
//! undecided first stage sends to a second, the level each stage's test must
//! meet (alpha spent across the two stages, Pocock's split), and the second
//! stage's verdicts over the boots of both.
//!
//! The split is Pocock's: both stages test at the same nominal level `a'`,
//! chosen so that, under no change, the chance that either stage rejects is
//! the overall alpha. With equal stages (the second stage as many boots as
//! the first) and alpha 0.05, `a' = 0.0294` (the textbook value); it is
//! computed here for the planned boots from the correlation of the two
//! stages' statistics, `sqrt(n1 / (n1 + n2))`.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Continuous, ContinuousCDF, Normal};

use super::decide::{decide_all, Comparison, Decision, Rule, Verdict};

/// The two stages' levels, printed with the report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spending {
    /// The overall alpha across both stages.
    pub alpha: f64,
    /// The nominal level each stage's test meets (Pocock: the same for both).
    pub nominal: f64,
    /// Boots per arm of the first stage.
    pub first_boots: usize,
    /// Boots per arm the second stage adds.
    pub second_boots: usize,
}

impl Spending {
    /// Pocock's split of `alpha` for a first stage of `first_boots` boots
    /// per arm and a second of `second_boots` more.
    pub fn pocock(alpha: f64, first_boots: usize, second_boots: usize) -> Spending {
        let rho = (first_boots as f64 / (first_boots + second_boots).max(1) as f64).sqrt();
        Spending {
            alpha,
            nominal: pocock_nominal(alpha, rho),
            first_boots,
            second_boots,
        }
    }

    /// The rule one stage decides under: `rule` at the nominal level.
    pub fn stage_rule(&self, rule: &Rule) -> Rule {
        Rule {
            alpha: self.nominal,
            ..*rule
        }
    }

    /// The split in words, as the report and docs state it.
    pub fn text(&self) -> String {
        format!(
            "second stage: {} more boots per arm for a key cell that ends unsure or ~ with its interval reaching past its threshold on the worse side; alpha {} spent across the two stages by Pocock's split: each stage's q must be ≤ {:.4}",
            self.second_boots, self.alpha, self.nominal
        )
    }
}

/// Probability that `|Z1| <= c` and `|Z2| <= c` for standard normals of
/// correlation `rho` (Simpson's rule over `z1`).
fn both_inside(c: f64, rho: f64) -> f64 {
    let n = Normal::standard();
    let s = (1.0 - rho * rho).max(1e-12).sqrt();
    let f = |z: f64| n.pdf(z) * (n.cdf((c - rho * z) / s) - n.cdf((-c - rho * z) / s));
    let k = 400;
    let h = 2.0 * c / k as f64;
    let sum: f64 = (0..=k)
        .map(|i| {
            let w = if i == 0 || i == k {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            w * f(-c + i as f64 * h)
        })
        .sum();
    sum * h / 3.0
}

/// The two-sided nominal level `a'` of Pocock's two-stage design: the `c`
/// with `P(|Z1| > c or |Z2| > c) = alpha`, as `2 (1 - Φ(c))` (bisection).
pub fn pocock_nominal(alpha: f64, rho: f64) -> f64 {
    let n = Normal::standard();
    let (mut lo, mut hi) = (n.inverse_cdf(1.0 - alpha / 2.0), n.inverse_cdf(1.0 - alpha / 4.0));
    for _ in 0..60 {
        let c = (lo + hi) / 2.0;
        if 1.0 - both_inside(c, rho) > alpha {
            lo = c;
        } else {
            hi = c;
        }
    }
    2.0 * (1.0 - n.cdf((lo + hi) / 2.0))
}

/// Whether a first-stage decision sends its cell to the second stage: it
/// ended `unsure` or `~` and its interval reaches past its threshold on the
/// worse side (a change that matters is not ruled out, and none was shown).
pub fn wants_second_stage(d: &Decision) -> bool {
    matches!(d.performance, Verdict::Unsure | Verdict::NotSignificant) && d.may_regress()
}

/// The second stage's verdicts: every comparison (the cells sent to the
/// second stage with the boots of both stages, the others as they were)
/// decided again in one BH pass at the nominal level; the cells not sent
/// keep their first-stage decision.
pub fn decide_second_stage(first: &[Decision], both: &[Comparison], sent: &[bool], rule: &Rule) -> Vec<Decision> {
    let again = decide_all(both, rule);
    first
        .iter()
        .zip(again)
        .zip(sent)
        .map(|((d1, d2), &s)| if s { d2 } else { *d1 })
        .collect()
}

/// The decisions of a report whose matrix plans a second stage of `extra`
/// boots after `first_boots`, and which cells its first stage sends: the
/// first stage's comparisons (`first`) at Pocock's nominal level; each
/// key cell (`keys`) that [`wants_second_stage`]; and, once the second
/// stage has boots (a comparison in `both` holds more boots than in
/// `first`), those cells decided again over both stages'. With `extra == 0`
/// one pass over `both` at `rule.alpha`, no cell sent.
pub fn decide_staged(
    first: &[Comparison],
    both: &[Comparison],
    keys: &[bool],
    rule: &Rule,
    (first_boots, extra): (usize, usize),
) -> (Vec<Decision>, Vec<bool>) {
    if extra == 0 {
        return (decide_all(both, rule), vec![false; both.len()]);
    }
    let stage = Spending::pocock(rule.alpha, first_boots, extra).stage_rule(rule);
    let d1 = decide_all(first, &stage);
    let sent: Vec<bool> = d1.iter().zip(keys).map(|(d, &k)| k && wants_second_stage(d)).collect();
    let grown = first
        .iter()
        .zip(both)
        .any(|(a, b)| a.base.len() != b.base.len() || a.new.len() != b.new.len());
    if !grown {
        return (d1, sent);
    }
    (decide_second_stage(&d1, both, &sent, &stage), sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::RatioCi;

    fn decision(performance: Verdict, ratio: (f64, f64, f64), higher_is_better: bool) -> Decision {
        let c = Comparison::new(vec![100.0; 3], vec![100.0; 3], higher_is_better);
        let mut d = decide_all(
            &[c],
            &Rule {
                resamples: 10,
                ..Rule::default()
            },
        )[0];
        d.performance = performance;
        d.verdict = performance;
        d.ratio = Some(RatioCi {
            ratio: ratio.0,
            lo: ratio.1,
            hi: ratio.2,
        });
        d
    }

    #[test]
    fn undecided_cells_whose_interval_reaches_past_the_threshold_go_to_the_second_stage() {
        use Verdict::*;
        // (first stage, ratio with interval, higher is better, second stage?); threshold 2%
        let table = [
            (NotSignificant, (0.99, 0.96, 1.02), true, true), // ~, could be 4% worse
            (NotSignificant, (1.01, 0.985, 1.04), true, false), // ~, worse side within 1.5%
            (NotSignificant, (1.01, 0.96, 1.04), false, true), // latency: could be 4% slower
            (Unsure, (0.975, 0.96, 0.99), true, true),        // significant, straddles 2%
            (Unsure, (1.025, 1.01, 1.04), true, false),       // straddles on the better side
            (Regressed, (0.95, 0.93, 0.97), true, false),     // decided
            (Equivalent, (1.0, 0.99, 1.01), true, false),
            (Small, (0.99, 0.985, 0.995), true, false),
            (Insufficient, (0.9, 0.8, 1.0), true, false),
        ];
        for (v, r, hib, want) in table {
            let d = decision(v, r, hib);
            assert_eq!(wants_second_stage(&d), want, "{v:?} {r:?} higher_is_better {hib}");
        }
    }

    #[test]
    fn the_second_stage_decides_only_the_cells_sent_to_it() {
        let rule = Rule {
            resamples: 500,
            ..Rule::default()
        };
        let base = vec![100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
        let first_new = vec![96.0, 98.6, 95.5, 99.3, 96.2, 98.0];
        let cells = vec![
            Comparison::new(base.clone(), first_new.clone(), true),
            Comparison::new(base.clone(), base.clone(), true),
        ];
        let first = decide_all(&cells, &rule);
        assert!(wants_second_stage(&first[0]), "{:?}", first[0]);
        // six more boots per arm, the variant's all 4% lower
        let mut both = cells.clone();
        both[0].base.extend([100.1, 99.8, 100.3, 99.9, 100.0, 100.4]);
        both[0].new.extend([96.1, 95.8, 96.3, 95.9, 96.0, 96.4]);
        let sent = [true, false];
        let second = decide_second_stage(&first, &both, &sent, &Spending::pocock(0.05, 6, 6).stage_rule(&rule));
        assert_eq!(
            (second[0].n_new, second[0].verdict),
            (12, Verdict::Regressed),
            "{:?}",
            second[0]
        );
        assert_eq!(second[1], first[1], "a cell not sent keeps its first-stage decision");
    }
}
