//! Fisher's exact test for "the new variant fails more often than base".

use statrs::function::factorial::ln_binomial;

/// One-sided Fisher exact p-value that the failure proportion `failed / of`
/// exceeds `base_failed / base_of`: with the margins fixed, the hypergeometric
/// probability of seeing `failed` or more failures on the new side.
///
/// Returns 1 when either side is empty or a count exceeds its total.
pub fn fisher_greater(failed: usize, of: usize, base_failed: usize, base_of: usize) -> f64 {
    if of == 0 || base_of == 0 || failed > of || base_failed > base_of {
        return 1.0;
    }
    let total = (of + base_of) as u64;
    let fails = (failed + base_failed) as u64;
    let draws = of as u64;
    let ln_all = ln_binomial(total, draws);
    let top = fails.min(draws);
    let p: f64 = (failed as u64..=top)
        .filter(|&k| draws - k <= total - fails)
        .map(|k| (ln_binomial(fails, k) + ln_binomial(total - fails, draws - k) - ln_all).exp())
        .sum();
    p.clamp(0.0, 1.0)
}
