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
    /// The per-arm run offset (relative sd) the interval allows for: an
    /// offset of each arm in each run, shared by that arm's blocks of the
    /// run, so a run's blocks are not independent replicates. Its variance
    /// is added per run; from 3 runs on, the interval is also no narrower
    /// than the one with the run means as replicates.
    #[serde(default = "wall_offset")]
    pub run_offset: f64,
}

/// The per-arm run offset allowed for on a wall clock: none (no measurement
/// yet); the run means as replicates, from 3 runs on, carry it there (an
/// allowance of 2% leaves a 3% change undecided in every simulated
/// bisection, docs/reproduce.md).
pub const WALL_OFFSET: f64 = 0.0;
/// The per-arm run offset allowed for under icount (the bound from recorded
/// icount bisections, issue 29).
pub const ICOUNT_OFFSET: f64 = crate::stats::across::ICOUNT_NIGHT_SD;

fn wall_offset() -> f64 {
    WALL_OFFSET
}

impl Default for Rule {
    fn default() -> Rule {
        Rule {
            batch: 5,
            max_rounds: 40,
            alpha: 0.05,
            skip_after: 2,
            min_share: 0.2,
            run_offset: WALL_OFFSET,
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
             the whole change is not bisected; a candidate that gives no value in {s} runs is skipped; the run, not \
             the block, is the replicate: a per-arm run offset of {tau}% is allowed for per run, and from 3 runs on the \
             interval is no narrower than the one on the run means (t on runs - 1 df)",
            b = self.batch,
            m = self.max_rounds,
            c = 100.0 * (1.0 - self.level()),
            l = self.level(),
            a = self.alpha,
            k = self.looks(),
            s = self.skip_after,
            ms = self.min_share,
            mb = 1.0 - self.min_share,
            tau = self.run_offset * 100.0
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

/// The covariances of the means of `u` and `v` (`var ū`, `var v̄`, `cov`).
fn covs(u: &[f64], v: &[f64]) -> (f64, f64, f64, f64, f64) {
    let n = u.len() as f64;
    let (mu, mv) = (mean(u), mean(v));
    (
        mu,
        mv,
        cov(u, mu, u, mu) / n,
        cov(v, mv, v, mv) / n,
        cov(u, mu, v, mv) / n,
    )
}

fn t_of(df: f64, level: f64) -> Option<f64> {
    Some(StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(1.0 - level / 2.0))
}

/// The candidate's share with its interval at `level`, `runs` the blocks
/// each run gave and `tau` the per-arm run offset allowed for; None below 3
/// blocks, for a value that is not positive, or when the ends do not differ
/// in these blocks (the interval is not bounded).
pub fn share(blocks: &[Block], runs: &[usize], level: f64, tau: f64) -> Option<Share> {
    let n = blocks.len();
    if n < 3 || blocks.iter().any(|b| !(b.good > 0.0 && b.bad > 0.0 && b.cand > 0.0)) {
        return None;
    }
    let u: Vec<f64> = blocks.iter().map(|b| b.cand.ln() - b.good.ln()).collect();
    let v: Vec<f64> = blocks.iter().map(|b| b.bad.ln() - b.good.ln()).collect();
    let (mu, mv, mut a, mut b, mut c) = covs(&u, &v);
    // runs as told, or one run when they do not add up to the blocks
    let runs: Vec<usize> = if runs.iter().sum::<usize>() == n {
        runs.iter().copied().filter(|&k| k > 0).collect()
    } else {
        vec![n]
    };
    let r = runs.len() as f64;
    // the arms' run offsets: u = cand − good and v = bad − good share good's
    let same = blocks.iter().all(|x| x.cand == x.bad);
    let t2 = tau * tau;
    a += 2.0 * t2 / r;
    b += 2.0 * t2 / r;
    c += if same { 2.0 } else { 1.0 } * t2 / r;
    let mut t = t_of(n as f64 - 1.0, level)?;
    if runs.len() >= 3 {
        // the run means as replicates, t on runs − 1 df, where that is wider
        let (mut ur, mut vr, mut at) = (vec![], vec![], 0);
        for k in &runs {
            ur.push(mean(&u[at..at + k]));
            vr.push(mean(&v[at..at + k]));
            at += k;
        }
        let (_, _, ra, rb, rc) = covs(&ur, &vr);
        let tr = t_of(r - 1.0, level)?;
        if tr * tr * (ra + rb) > t * t * (a + b) {
            (a, b, c, t) = (ra, rb, rc, tr);
        }
    }
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
pub fn judge(blocks: &[Block], runs: &[usize], rounds: u32, rule: &Rule) -> (Call, Option<Share>) {
    let s = share(blocks, runs, rule.level(), rule.run_offset);
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
        let rule = Rule {
            run_offset: 0.0,
            ..Rule::default()
        };
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
            let (call, s) = judge(&b, &[10], 10, &rule);
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
        assert_eq!(judge(&same, &[5], 5, &rule).0, Call::More);
        assert!(
            matches!(judge(&same, &[5], 40, &rule).0, Call::Undecided(w) if w.starts_with("the ends do not differ"))
        );
        assert!(
            share(&blocks(&[100.0; 2]), &[2], 0.01, 0.0).is_none(),
            "two blocks are not enough"
        );
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
        let s = share(&b, &[4], 0.0125, 0.0).unwrap();
        assert!((s.est - 0.4975).abs() < 1e-3 && s.lo == s.hi, "{s:?}");
    }

    #[test]
    fn a_per_arm_run_offset_widens_the_interval_of_one_run() {
        // one run of 10 blocks, half the change: decided with no offset allowed for,
        // not with a 2% one (the run's blocks are one replicate of the arms' offsets)
        let b = blocks(&[98.5; 10]);
        let w = |tau: f64| {
            let s = share(&b, &[10], 0.00625, tau).map(|s| s.hi - s.lo);
            s.unwrap_or(f64::INFINITY)
        };
        assert!(w(0.0) < 0.3, "{}", w(0.0));
        assert!(w(0.0004) < 0.3, "icount's bound costs little: {}", w(0.0004));
        assert!(w(0.02) > 1.0, "{}", w(0.02));
        // five runs whose means disagree: no narrower than the run means give
        let spread: Vec<Block> = b
            .iter()
            .enumerate()
            .map(|(i, x)| Block {
                cand: x.cand * (1.0 + [0.01, -0.01, 0.005, -0.005, 0.0][i / 2]),
                ..*x
            })
            .collect();
        let one = share(&spread, &[10], 0.00625, 0.0).unwrap();
        let five = share(&spread, &[2; 5], 0.00625, 0.0).unwrap();
        assert!(five.hi - five.lo > one.hi - one.lo, "{one:?} {five:?}");
    }
}
