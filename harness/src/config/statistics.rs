//! `statistics:`'s thresholds and second stage: the declared practical
//! threshold of every metric (`threshold:`, its older name `floor:`, and
//! per-metric `thresholds:`), written as a fraction (`0.03`) or a percentage
//! (`3%`), and the boots of the gate's second stage (`second_stage: {boots: N}`).

use super::raw::{RawFraction, RawStatistics};
use super::validated::Statistics;

/// The threshold of a metric the matrix gives none: 2%.
pub const DEFAULT_THRESHOLD: f64 = 0.02;

/// A fraction in `[0, 1)` from `0.03` or `3%`; else the problem, naming `path`.
fn fraction(f: &RawFraction, path: &str) -> Result<f64, String> {
    let x = match f {
        RawFraction::Number(x) => *x,
        RawFraction::Text(t) => match t.trim().strip_suffix('%').map(|n| n.trim().parse::<f64>()) {
            Some(Ok(n)) => n / 100.0,
            _ => return Err(format!("{path}: `{t}` is not a fraction (write 0.03 or 3%)")),
        },
    };
    if (0.0..1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{path}: {x} must lie in [0, 1) (0.03 or 3%)"))
    }
}

/// `statistics`' thresholds and second stage checked into `s`; every
/// problem pushed to `p` with its YAML path (whether a per-metric key
/// names a benchmark or its metric: `keys.rs`).
pub(super) fn thresholds(mut s: Statistics, raw: &RawStatistics, p: &mut Vec<String>) -> Statistics {
    let take = |f: &RawFraction, path: &str, p: &mut Vec<String>| fraction(f, path).map_err(|e| p.push(e)).ok();
    s.threshold = match (&raw.threshold, &raw.floor) {
        (Some(_), Some(_)) => {
            p.push("statistics.floor: `floor` is the older name of `threshold`: give one of them".into());
            DEFAULT_THRESHOLD
        }
        (Some(t), None) => take(t, "statistics.threshold", p).unwrap_or(DEFAULT_THRESHOLD),
        (None, Some(f)) => take(f, "statistics.floor", p).unwrap_or(DEFAULT_THRESHOLD),
        (None, None) => DEFAULT_THRESHOLD,
    };
    for (key, f) in raw.thresholds.iter().flatten() {
        let path = format!("statistics.thresholds.{key}");
        if let Some(x) = take(f, &path, p) {
            s.thresholds.insert(key.clone(), x);
        }
    }
    if let Some(b) = raw.second_stage.as_ref().and_then(|x| x.boots) {
        if b == 0 || b > 100 {
            p.push(format!(
                "statistics.second_stage.boots: {b} must lie in 1..=100 (leave `second_stage` out for none)"
            ));
        }
    }
    s
}

/// The most bootstrap resamples `statistics.resamples` may ask for: each
/// interval keeps its resamples in memory (8 bytes each), so 10^12 aborted
/// `harness report` on allocation; 10^6 is a hundred times the default.
pub const MAX_RESAMPLES: usize = 1_000_000;

/// `statistics.resamples` must lie in `1..=`[`MAX_RESAMPLES`].
pub(super) fn check_resamples(n: usize, p: &mut Vec<String>) {
    if n == 0 || n > MAX_RESAMPLES {
        p.push(format!("statistics.resamples: {n} must lie in 1..={MAX_RESAMPLES}"));
    }
}
