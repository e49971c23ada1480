//! Benjamini-Hochberg false-discovery-rate adjustment.

/// Benjamini-Hochberg adjusted p-values (q-values), in the same order as `p`.
///
/// With the `m` finite p-values sorted ascending, `q_(i) = min_{j >= i} (m / j) * p_(j)`,
/// capped at 1; this is `scipy.stats.false_discovery_control(p, method='bh')`. The result
/// is monotone in `p` (a smaller p never gets a larger q) and `q >= p`.
///
/// Entries that are not finite (e.g. `NaN` for a cell where no test was run) are returned
/// as `NaN` and are not counted in `m`. Finite p-values are clamped to `[0, 1]` first.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_finite()).collect();
    let m = idx.len();
    let mut q = vec![f64::NAN; p.len()];
    if m == 0 {
        return q;
    }
    idx.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut running = 1.0f64;
    for (rank0, &i) in idx.iter().enumerate().rev() {
        let pi = p[i].clamp(0.0, 1.0);
        let adj = pi * m as f64 / (rank0 + 1) as f64;
        running = running.min(adj);
        // max(.., pi) only guards against a one-ulp rounding below p; both sequences are
        // monotone, so their maximum is too.
        q[i] = running.max(pi);
    }
    q
}
