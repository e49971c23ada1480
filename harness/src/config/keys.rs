//! The keys that name a benchmark or one of its metrics (`key_metrics:`,
//! `statistics.thresholds:`): `benchmark` or `benchmark.metric`, the metric
//! one the benchmark can produce ([`super::metric_names`]).

use std::collections::{BTreeMap, BTreeSet};

use super::raw::RawMatrix;
use super::validated::Benchmark;

/// Each benchmark the matrix defines with the metrics it can produce under
/// some setting of the matrix: its own parameters or a profile's
/// `overrides:` (test_vmalloc's metrics follow `run_test_mask`), and the
/// profile metrics when the top level or any profile counts instructions
/// with kernel profiles (`guest.clock: icount`, `kernel_profile` not
/// false). A key is checked once for every profile, so one that only a
/// profile's setting produces is accepted, and the gate says where a run
/// produced no such cell. `None`: names known only from the output.
pub(super) struct Producible(BTreeMap<String, Option<BTreeSet<String>>>);

impl Producible {
    /// The benchmarks of `raw` (before a profile narrows them) and their metrics.
    pub(super) fn of(raw: &RawMatrix) -> Producible {
        let icount = |c: &Option<String>| c.as_deref() == Some("icount");
        let profiled = raw.guest.kernel_profile != Some(false)
            && (icount(&raw.guest.clock) || raw.profiles.values().any(|p| icount(&p.clock)));
        let mut all = BTreeMap::new();
        for b in &raw.benchmarks {
            let mut settings = vec![b.clone()];
            for o in raw.profiles.values().filter_map(|p| p.overrides.get(&b.name)) {
                let mut with = b.clone();
                o.apply(&mut with);
                settings.push(with);
            }
            let mut names = Some(BTreeSet::new());
            for s in &settings {
                let Ok(kind) = super::params::bench_kind(s) else {
                    continue; // its problem is said where the benchmark is checked
                };
                let bench = Benchmark {
                    name: s.name.clone(),
                    kind,
                    timeout_s: 0,
                };
                match (super::metric_names(&bench, profiled), names.as_mut()) {
                    (Some(ms), Some(n)) => n.extend(ms),
                    _ => names = None,
                }
            }
            all.insert(b.name.clone(), names.filter(|n| !n.is_empty()));
        }
        Producible(all)
    }

    /// What is wrong with `key`, a `benchmark` or `benchmark.metric` (the
    /// longest benchmark name before a dot); `None` when it names one.
    pub(super) fn problem(&self, key: &str) -> Option<String> {
        if self.0.contains_key(key) {
            return None;
        }
        let Some((b, metric, names)) = self
            .0
            .iter()
            .filter_map(|(b, n)| Some((b, key.strip_prefix(b.as_str())?.strip_prefix('.')?, n)))
            .max_by_key(|(b, ..)| b.len())
        else {
            return Some(format!(
                "`{key}` names no benchmark (write `benchmark` or `benchmark.metric`)"
            ));
        };
        let names = names.as_ref()?;
        (!names.contains(metric)).then(|| {
            let list: Vec<&str> = names.iter().map(String::as_str).collect();
            format!("`{key}` names no metric of {b} (its metrics: {})", list.join(", "))
        })
    }
}

/// Whether `key` names benchmark `b` (`b` or `b.metric`).
pub(super) fn names_benchmark(key: &str, b: &str) -> bool {
    key.strip_prefix(b).is_some_and(|m| m.is_empty() || m.starts_with('.'))
}
