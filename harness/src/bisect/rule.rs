//! The rule of one bisection step (pure): how much of the good → bad change
//! a candidate carries, with an interval, and what that makes it.
//!
//! Every measurement boots the candidate together with both ends of its
//! segment in randomised blocks (one round of the run: one boot of each, in
//! a seeded order), so an offset of the run, or of a block, moves the three
//! together. Per block, on log values, `u = cand − good` and `v = bad − good`;
//! the fraction of the change the candidate carries is `f = ū / v̄`, with
//! Fieller's interval for a ratio of paired means at the look's level: the
//! `f` for which `(ū − f·v̄)² ≤ t²·var(ū − f·v̄)`, Student's t on `n − 1`
//! degrees of freedom. The interval is bounded only when the ends differ in
//! these blocks (`v̄² > t²·var(v̄)`).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The rule's parameters.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Rule {
    /// Rounds (one boot of each arm) added to a candidate per look.
    pub batch: u32,
    /// Most rounds a candidate gets.
    pub max_rounds: u32,
    /// Overall level of a step; each look's interval is at `alpha / looks`.
    pub alpha: f64,
    /// Runs in a row that give a candidate no value before it is skipped.
    pub skip_after: u32,
    /// The least share on each side that makes a candidate "in between",
    /// and the least share of the whole change a segment must carry to be
    /// bisected.
    pub min_share: f64,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule {
            batch: 5,
            max_rounds: 40,
            alpha: 0.05,
            skip_after: 2,
            min_share: 0.2,
        }
    }
}

impl Rule {
    /// Looks a candidate can get.
    pub fn looks(&self) -> u32 {
        self.max_rounds.div_ceil(self.batch.max(1)).max(1)
    }

    /// The level of each look's interval (Bonferroni over the looks).
    pub fn level(&self) -> f64 {
        self.alpha / self.looks() as f64
    }

    /// The rule for a segment that carries `share` of the whole change: a
    /// smaller change needs more rounds, up to twice as many for half of it
    /// or less (more looks, each at a smaller level).
    pub fn for_share(&self, share: f64) -> Rule {
        let k = (1.0 / share.abs().max(1e-9)).clamp(1.0, 2.0);
        let rounds = (f64::from(self.max_rounds) * k / f64::from(self.batch.max(1))).ceil() as u32 * self.batch.max(1);
        Rule {
            max_rounds: rounds,
            ..*self
        }
    }

    /// The rule in words, printed with every bisection.
    pub fn text(&self) -> String {
        format!(
            "rule: each measurement boots the candidate with both ends of its segment in randomised blocks within one run \
             ({b} rounds per look, at most {m}); per block, on log values, the candidate's share of the good-to-bad change is \
             estimated with a {c:.2}% Fieller interval ({l:.4} = alpha {a} / {k} looks); like good when the interval lies below 1/2 \
             and reaches {ms}, like bad when it lies above 1/2 and reaches {mb}, in between (a share of at least {ms} on each side: \
             both halves are bisected) when it lies within ({ms}, {mb}), more rounds otherwise; after {m} rounds, in between when it excludes 0 and 1, else undecided (up to twice as \
             many rounds, and looks, in a segment that carries half of the change or less); a half that carries less than {ms} of \
             the whole change is not bisected; a candidate that gives no value in {s} runs is skipped",
            b = self.batch,
            m = self.max_rounds,
            c = 100.0 * (1.0 - self.level()),
            l = self.level(),
            a = self.alpha,
            k = self.looks(),
            s = self.skip_after,
            ms = self.min_share,
            mb = 1.0 - self.min_share
        )
    }
}

/// One block: the boot values of good, bad and the candidate in one round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Block {
    /// The good end.
    pub good: f64,
    /// The bad end.
    pub bad: f64,
    /// The candidate.
    pub cand: f64,
}

/// The fraction of the change a candidate carries (0 like good, 1 like bad).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// Blocks it rests on.
    pub n: usize,
    /// `ū / v̄`.
    pub est: f64,
    /// Lower end of its interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// The ends' change (bad / good − 1, from the blocks' mean log ratio).
    pub change: f64,
}

/// What a candidate looks like.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// Like the good end.
    Good,
    /// Like the bad end.
    Bad,
    /// Carries a share, different from both ends.
    Between,
    /// Needs more rounds.
    More,
    /// Cannot be decided (why).
    Undecided(String),
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn cov(x: &[f64], mx: f64, y: &[f64], my: f64) -> f64 {
    x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum::<f64>() / (x.len() as f64 - 1.0)
}

/// The candidate's share with its interval at `level`; None below 3 blocks,
/// for a value that is not positive, or when the ends do not differ in
/// these blocks (the interval is not bounded).
pub fn share(blocks: &[Block], level: f64) -> Option<Share> {
    let n = blocks.len();
    if n < 3 || blocks.iter().any(|b| !(b.good > 0.0 && b.bad > 0.0 && b.cand > 0.0)) {
        return None;
    }
    let u: Vec<f64> = blocks.iter().map(|b| b.cand.ln() - b.good.ln()).collect();
    let v: Vec<f64> = blocks.iter().map(|b| b.bad.ln() - b.good.ln()).collect();
    let (mu, mv) = (mean(&u), mean(&v));
    let (a, b, c) = (
        cov(&u, mu, &u, mu) / n as f64,
        cov(&v, mv, &v, mv) / n as f64,
        cov(&u, mu, &v, mv) / n as f64,
    );
    let t = StudentsT::new(0.0, 1.0, n as f64 - 1.0)
        .ok()?
        .inverse_cdf(1.0 - level / 2.0);
    let t2 = t * t;
    let qa = mv * mv - t2 * b;
    if qa <= 0.0 || mv == 0.0 {
        return None;
    }
    let qb = mu * mv - t2 * c;
    let qc = mu * mu - t2 * a;
    let d = (qb * qb - qa * qc).max(0.0).sqrt();
    Some(Share {
        n,
        est: mu / mv,
        lo: (qb - d) / qa,
        hi: (qb + d) / qa,
        change: mv.exp() - 1.0,
    })
}

/// The call at one look, from the blocks so far and the rounds asked so far.
pub fn judge(blocks: &[Block], rounds: u32, rule: &Rule) -> (Call, Option<Share>) {
    let s = share(blocks, rule.level());
    let last = rounds >= rule.max_rounds;
    let call = match s {
        Some(s) if s.lo > rule.min_share && s.hi < 1.0 - rule.min_share => Call::Between,
        Some(s) if s.hi < 0.5 => Call::Good,
        Some(s) if s.lo > 0.5 => Call::Bad,
        // at the last look a share on each side, however small, is still an answer
        Some(s) if last && s.lo > 0.0 && s.hi < 1.0 => Call::Between,
        None if last && blocks.len() >= 3 => {
            Call::Undecided(format!("the ends do not differ in {} blocks", blocks.len()))
        }
        None if last => Call::Undecided(format!("only {} complete blocks in {rounds} rounds", blocks.len())),
        Some(s) if last => Call::Undecided(format!(
            "its share [{:.2}, {:.2}] reaches the middle and an end after {} blocks",
            s.lo, s.hi, s.n
        )),
        _ => Call::More,
    };
    (call, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(cand: &[f64]) -> Vec<Block> {
        // good 100, bad 97 (3% slower), a per-block offset common to the three
        cand.iter()
            .enumerate()
            .map(|(i, c)| {
                let o = 1.0 + [0.01, -0.02, 0.015, 0.0, -0.01, 0.02][i % 6];
                let w = [0.001, -0.002, 0.0005, 0.0015, -0.001, 0.0][i % 6];
                Block {
                    good: 100.0 * o * (1.0 + w),
                    bad: 97.0 * o * (1.0 - w),
                    cand: c * o,
                }
            })
            .collect()
    }

    #[test]
    fn the_share_places_a_candidate_between_the_ends_whatever_the_block_offsets() {
        let rule = Rule::default();
        // a tenth of the change is like good: shares under min_share are not split out
        let cases: [(&str, f64, Call); 5] = [
            ("like good", 100.0, Call::Good),
            ("like bad", 97.0, Call::Bad),
            ("half", 98.5, Call::Between),
            ("a third", 99.0, Call::Between),
            ("a tenth", 99.7, Call::Good),
        ];
        for (what, c, want) in cases {
            let b = blocks(&[c; 10]);
            let (call, s) = judge(&b, 10, &rule);
            let s = s.unwrap();
            assert_eq!(call, want, "{what}: {s:?}");
            assert!(s.lo <= s.est && s.est <= s.hi, "{what}: {s:?}");
            assert!((s.change + 0.03).abs() < 0.002, "{what}: {s:?}");
        }
        // the ends equal: no bounded interval; more rounds, then undecided
        let same: Vec<Block> = blocks(&[100.0; 5])
            .into_iter()
            .enumerate()
            .map(|(i, b)| Block {
                bad: b.good * (1.0 + [0.002, -0.001, 0.0, 0.001, -0.002][i]),
                ..b
            })
            .collect();
        assert_eq!(judge(&same, 5, &rule).0, Call::More);
        assert!(matches!(judge(&same, 40, &rule).0, Call::Undecided(w) if w.starts_with("the ends do not differ")));
        assert!(share(&blocks(&[100.0; 2]), 0.01).is_none(), "two blocks are not enough");
        assert!(rule.text().contains("at most 40"));
        assert!((rule.level() - 0.05 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn a_deterministic_clock_gives_an_exact_share() {
        let b: Vec<Block> = (0..4)
            .map(|_| Block {
                good: 100.0,
                bad: 98.0,
                cand: 99.0,
            })
            .collect();
        let s = share(&b, 0.0125).unwrap();
        assert!((s.est - 0.4975).abs() < 1e-3 && s.lo == s.hi, "{s:?}");
    }
}
