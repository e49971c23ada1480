//! Tabulating a run: samples grouped into cells (benchmark × metric × vCPUs
//! × variant), each variant compared with `base` under the decision rule of
//! [`crate::stats`], failed steps shown as cells, and the same report as a
//! comfy-table, JSON, CSV and HTML. Reads the run directory only; never spawns.

pub mod compare;
pub mod html;
pub mod svg;

use std::collections::BTreeMap;

use anyhow::Result;
use comfy_table::{presets, ContentArrangement, Table};
use serde::Serialize;

use crate::stats::{self, Decision, Rule, Summary, Verdict};
use crate::store::{Event, Run, RunMeta, Sample};
use crate::vm::MeasureClock;

/// One variant's cell in a row.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Variant.
    pub variant: String,
    /// Measured samples (warm-up excluded).
    pub n: usize,
    /// Warm-up samples kept apart.
    pub n_warmup: usize,
    /// Median and its interval.
    pub summary: Option<Summary>,
    /// Comparison with base (None for base itself).
    pub decision: Option<Decision>,
    /// Why there is no value: a failed patch, build, boot or benchmark.
    pub failure: Option<String>,
    /// The measured values.
    pub values: Vec<f64>,
}

/// One row: a metric at a vCPU count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Benchmark.
    pub benchmark: String,
    /// Metric.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Direction.
    pub higher_is_better: bool,
    /// vCPUs.
    pub vcpus: u32,
    /// Cells in variant order (base first).
    pub cells: Vec<Cell>,
}

/// A boot, for the environment table.
#[derive(Debug, Clone, Serialize)]
pub struct BootRow {
    /// Boot id.
    pub boot_id: String,
    /// Variant.
    pub variant: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Accelerator.
    pub accel: String,
    /// Kernel image booted.
    pub image: String,
    /// Seconds to SSH.
    pub ready_s: Option<f64>,
    /// Kernel release.
    pub kernel: Option<String>,
    /// Guest nproc.
    pub nproc: Option<u32>,
    /// Guest memory.
    pub memory_mib: Option<u64>,
    /// ASLR setting.
    pub aslr: Option<u32>,
    /// vCPUs per host CPU.
    pub overcommit: f64,
    /// Mean steal fraction over its samples.
    pub steal: Option<f64>,
    /// Mean idle fraction over its samples.
    pub idle: Option<f64>,
    /// Console findings.
    pub findings: Vec<String>,
    /// Failure.
    pub error: Option<String>,
}

/// A whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Run id.
    pub run_id: String,
    /// Started.
    pub started: String,
    /// Variants in order.
    pub variants: Vec<String>,
    /// Rows.
    pub rows: Vec<Row>,
    /// Boots.
    pub boots: Vec<BootRow>,
    /// Series states.
    pub series: Vec<(String, String)>,
    /// Builds: variant, seconds, cached, error.
    pub builds: Vec<(String, f64, bool, Option<String>)>,
    /// Notices and failures worth reading.
    pub notes: Vec<String>,
    /// The rule used.
    pub rule: Rule,
    /// The rule in words.
    pub rule_text: String,
    /// Host line.
    pub host: String,
    /// The run finished every boot job.
    pub complete: bool,
    /// The clock every number of the report is in.
    pub clock: Option<MeasureClock>,
    /// What that clock means, in words.
    pub clock_text: String,
}

/// Builds the report of a run; `noise` is the calibrated noise floor.
pub fn build(run: &Run, noise: Option<f64>) -> Result<Report> {
    let meta = run.meta()?;
    let samples = run.samples()?;
    let events = run.events()?;
    Ok(build_from(&meta, &samples, &events, noise))
}

/// Builds a report from loaded records.
pub fn build_from(meta: &RunMeta, samples: &[Sample], events: &[Event], noise: Option<f64>) -> Report {
    let m = &meta.matrix;
    let variants: Vec<String> = m.variants.iter().map(|v| v.name.clone()).collect();
    let rule = Rule {
        alpha: m.statistics.alpha,
        floor: stats::effect_floor(noise).max(m.statistics.floor),
        min_samples: 4,
        resamples: m.statistics.resamples,
        seed: m.statistics.seed,
    };

    // failures per (variant) and per (variant, vcpus, benchmark)
    let mut variant_fail: BTreeMap<String, String> = BTreeMap::new();
    let mut cell_fail: BTreeMap<(String, u32, String), String> = BTreeMap::new();
    let mut boot_fail: BTreeMap<(String, u32), String> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut boots: Vec<BootRow> = Vec::new();
    let mut series = Vec::new();
    let mut builds = Vec::new();
    let mut ended = 0usize;
    for e in events {
        match e {
            Event::Patch { variant, error: Some(err), .. } | Event::Config { variant, error: Some(err), .. } => {
                variant_fail.insert(variant.clone(), err.clone());
            }
            Event::Build { variant, build_s, cached, error, .. } => {
                if let Some(err) = error {
                    variant_fail.insert(variant.clone(), err.clone());
                }
                builds.push((variant.clone(), *build_s, *cached, error.clone()));
            }
            Event::Series { series: s, state } => series.push((s.clone(), state.to_string())),
            Event::Config { variant, lost, .. } if !lost.is_empty() => {
                let l: Vec<String> = lost.iter().map(|x| x.to_string()).collect();
                notes.push(format!("{variant}: config symbols not kept: {}", l.join(", ")));
            }
            Event::Boot { variant, vcpus, boot_id, accel, ready_s, env, error, findings, overcommit, image, .. } => {
                if let Some(err) = error {
                    boot_fail.insert((variant.clone(), *vcpus), err.clone());
                }
                boots.push(BootRow {
                    boot_id: boot_id.clone(),
                    variant: variant.clone(),
                    vcpus: *vcpus,
                    accel: format!("{accel:?}").to_lowercase(),
                    image: image.clone(),
                    ready_s: *ready_s,
                    kernel: env.as_ref().map(|e| e.kernel_release.clone()),
                    nproc: env.as_ref().map(|e| e.nproc),
                    memory_mib: env.as_ref().map(|e| e.memory_mib),
                    aslr: env.as_ref().map(|e| e.aslr),
                    overcommit: *overcommit,
                    steal: None,
                    idle: None,
                    findings: findings.iter().map(|f| f.signature.clone()).collect(),
                    error: error.clone(),
                });
            }
            Event::BenchFailed { variant, vcpus, benchmark, repetition, error, boot_id } => {
                cell_fail.insert((variant.clone(), *vcpus, benchmark.clone()), error.clone());
                notes.push(format!("{boot_id} {benchmark} rep {repetition}: {error}"));
            }
            Event::BootEnd { boot_id, findings, error, variant, vcpus, .. } => {
                ended += 1;
                if let Some(b) = boot_id.as_ref().and_then(|id| boots.iter_mut().find(|b| &b.boot_id == id)) {
                    for f in findings {
                        if !b.findings.contains(&f.signature) {
                            b.findings.push(f.signature.clone());
                        }
                    }
                }
                if let Some(err) = error {
                    boot_fail.entry((variant.clone(), *vcpus)).or_insert(err.clone());
                }
                for f in findings {
                    notes.push(format!("{}: console: {} — {}", boot_id.clone().unwrap_or_default(), f.signature, f.line));
                }
            }
            Event::Notice { message } => notes.push(message.clone()),
            _ => {}
        }
    }
    for b in &mut boots {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.boot_id == b.boot_id && s.cpu.is_some()).collect();
        if !mine.is_empty() {
            b.steal = Some(mine.iter().map(|s| s.cpu.unwrap().steal).sum::<f64>() / mine.len() as f64);
            b.idle = Some(mine.iter().map(|s| s.cpu.unwrap().idle).sum::<f64>() / mine.len() as f64);
        }
    }

    let clock = run_clock(meta, events);
    // rows: every (benchmark, metric) seen or expected, at every vCPU count
    let mut metrics: Vec<(String, String, String, bool)> = Vec::new();
    for b in &m.benchmarks {
        let mut seen: Vec<(String, String, bool)> = samples
            .iter()
            .filter(|s| s.benchmark == b.name)
            .map(|s| (s.metric.clone(), s.unit.clone(), s.higher_is_better))
            .collect();
        seen.dedup();
        let mut uniq: Vec<(String, String, bool)> = Vec::new();
        for x in seen {
            if !uniq.iter().any(|u| u.0 == x.0) {
                uniq.push(x);
            }
        }
        if uniq.is_empty() {
            if let Some(p) = crate::bench::primary_metric(b) {
                uniq.push((p.to_string(), String::new(), true));
            } else {
                uniq.push(("(no summary)".into(), String::new(), false));
            }
        }
        // primary metric first
        if let Some(p) = crate::bench::primary_metric(b) {
            uniq.sort_by_key(|u| u.0 != p);
        }
        for (metric, unit, hib) in uniq {
            metrics.push((b.name.clone(), metric, unit, hib));
        }
    }
    let mut rows = Vec::new();
    let mut pairs: Vec<(Vec<f64>, Vec<f64>, bool)> = Vec::new();
    let mut pair_at: Vec<(usize, usize)> = Vec::new();
    for (bench, metric, unit, hib) in &metrics {
        for &vcpus in &m.vcpus {
            let mut cells = Vec::new();
            for v in &m.variants {
                if !v.benchmarks.contains(bench) {
                    continue;
                }
                let pick = |warm: bool| -> Vec<f64> {
                    samples
                        .iter()
                        .filter(|s| s.variant == v.name && s.vcpus == vcpus && &s.benchmark == bench && &s.metric == metric && s.warmup == warm)
                        .map(|s| s.value)
                        .collect()
                };
                let values = pick(false);
                let failure = variant_fail
                    .get(&v.name)
                    .or_else(|| cell_fail.get(&(v.name.clone(), vcpus, bench.clone())))
                    .or_else(|| boot_fail.get(&(v.name.clone(), vcpus)))
                    .cloned();
                cells.push(Cell {
                    variant: v.name.clone(),
                    n: values.len(),
                    n_warmup: pick(true).len(),
                    summary: stats::summarize(&values),
                    decision: None,
                    failure,
                    values,
                });
            }
            if cells.is_empty() {
                continue;
            }
            let ri = rows.len();
            if cells[0].variant == "base" {
                for ci in 1..cells.len() {
                    pairs.push((cells[0].values.clone(), cells[ci].values.clone(), *hib));
                    pair_at.push((ri, ci));
                }
            }
            let unit = clock.map_or_else(|| unit.clone(), |c| c.unit(unit));
            rows.push(Row { benchmark: bench.clone(), metric: metric.clone(), unit, higher_is_better: *hib, vcpus, cells });
        }
    }
    // one decision pass over the whole report: BH across every comparison
    let decisions = stats::decide_all(&pairs, &rule);
    for ((ri, ci), d) in pair_at.into_iter().zip(decisions) {
        rows[ri].cells[ci].decision = Some(d);
    }
    let planned = crate::plan::boot_jobs(m).len();
    let rule_text = format!(
        "cell: median with a distribution-free 95% CI; change: ratio of medians (variant/base) with a bootstrap 95% CI \
         ({} resamples, seed {}); test: two-sided Mann-Whitney U, Benjamini-Hochberg across the {} comparisons of this \
         report, alpha {}; effect floor {:.1}% (max of {:.1}% and the calibrated noise floor{}); regressed/improved = \
         significant and the whole CI beyond the floor; small = significant, within the floor; ≈ = CI inside the floor; \
         ~ = not significant (mde = smallest change detectable at 80% power); ? = fewer than {} samples per side. \
         Warm-up repetitions ({} per boot) are excluded. Boot order seed {}.",
        rule.resamples,
        rule.seed,
        pairs.len(),
        rule.alpha,
        rule.floor * 100.0,
        m.statistics.floor * 100.0,
        noise.map(|n| format!(" {:.1}%", n * 100.0)).unwrap_or_else(|| ", none measured".into()),
        rule.min_samples,
        m.sampling.warmup_repetitions,
        m.sampling.seed
    );
    Report {
        run_id: meta.id.clone(),
        started: meta.started.clone(),
        variants,
        rows,
        boots,
        series,
        builds,
        notes,
        rule,
        rule_text,
        host: format!("{} ({} CPUs, {} MiB, {}; {})", meta.host.hostname, meta.host.cpus, meta.host.memory_mib, meta.host.kernel, meta.host.qemu),
        complete: ended >= planned,
        clock,
        clock_text: clock.map(|c| format!("{}: {}", c.name(), c.describe())).unwrap_or_else(|| {
            "clock not recorded (a run from before clocks were recorded, or no boot yet)".into()
        }),
    }
}

/// The clock of a run: from `run.json`, else from its boot records.
fn run_clock(meta: &RunMeta, events: &[Event]) -> Option<MeasureClock> {
    meta.clock.or_else(|| {
        events.iter().find_map(|e| match e {
            Event::Boot { clock, .. } => *clock,
            _ => None,
        })
    })
}

/// Compact number: 3 significant digits or more for big values.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 {
        "0".to_string()
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

/// The text of a cell as the table shows it.
pub fn cell_text(c: &Cell) -> String {
    let mut s = match &c.summary {
        Some(sm) => format!("{} ±{:.1}% (n={})", num(sm.median), half_width_pct(sm), c.n),
        None => match &c.failure {
            Some(f) => format!("FAILED: {}", shorten(f, 60)),
            None => "-".into(),
        },
    };
    if let Some(d) = &c.decision {
        s.push('\n');
        s.push_str(&decision_text(d));
    }
    if c.summary.is_some() {
        if let Some(f) = &c.failure {
            s.push_str(&format!("\n(some failed: {})", shorten(f, 40)));
        }
    }
    s
}

fn half_width_pct(s: &Summary) -> f64 {
    if s.median == 0.0 {
        0.0
    } else {
        (s.ci_hi - s.ci_lo) / 2.0 / s.median.abs() * 100.0
    }
}

/// Verdict with its numbers, e.g. `-7.9% [-9.1, -6.5] regressed (p=0.001)`.
pub fn decision_text(d: &Decision) -> String {
    match (&d.verdict, &d.ratio) {
        (Verdict::Insufficient, _) => format!("? (n={}/{})", d.n_base, d.n_new),
        (Verdict::NotSignificant, r) => {
            let ch = r.as_ref().map(|r| format!("{} ", pct(r.ratio))).unwrap_or_default();
            let mde = d.mde.map(|m| format!(" mde {:.1}%", m * 100.0)).unwrap_or_default();
            format!("{ch}~ (p={:.2} n={}/{}{mde})", d.p.unwrap_or(f64::NAN), d.n_base, d.n_new)
        }
        (v, Some(r)) => format!(
            "{} [{}, {}] {} (p={:.3})",
            pct(r.ratio),
            pct(r.lo),
            pct(r.hi),
            v.symbol(),
            d.q.or(d.p).unwrap_or(f64::NAN)
        ),
        (v, None) => v.symbol().to_string(),
    }
}

fn shorten(s: &str, n: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.chars().count() > n {
        format!("{}…", first.chars().take(n).collect::<String>())
    } else {
        first.to_string()
    }
}

/// The terminal table.
pub fn table(r: &Report) -> String {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    if std::env::var_os("COLUMNS").is_none() {
        t.set_width(160);
    }
    let mut header = vec!["benchmark / metric".to_string(), "vCPUs".to_string()];
    header.extend(r.variants.iter().cloned());
    t.set_header(header);
    for row in &r.rows {
        let dir = if row.higher_is_better { "↑" } else { "↓" };
        let mut line = vec![format!("{} {}\n{} {}", row.benchmark, dir, row.metric, row.unit), row.vcpus.to_string()];
        for v in &r.variants {
            line.push(row.cells.iter().find(|c| &c.variant == v).map(cell_text).unwrap_or_default());
        }
        t.add_row(line);
    }
    let mut out = format!("run {} (started {}){}\n", r.run_id, r.started, if r.complete { "" } else { " — INCOMPLETE" });
    out.push_str(&format!("clock: {}\n", r.clock_text));
    out.push_str(&t.to_string());
    out.push('\n');
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// CSV: one line per cell.
pub fn csv(r: &Report) -> String {
    let mut s = String::from("benchmark,metric,unit,higher_is_better,vcpus,variant,n,median,ci_lo,ci_hi,ratio,ratio_lo,ratio_hi,p,q,verdict,failure\n");
    for row in &r.rows {
        for c in &row.cells {
            let (med, lo, hi) = c.summary.as_ref().map(|s| (s.median.to_string(), s.ci_lo.to_string(), s.ci_hi.to_string())).unwrap_or_default();
            let d = c.decision.as_ref();
            let rr = d.and_then(|d| d.ratio.as_ref());
            let f = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                csv_field(&row.benchmark),
                csv_field(&row.metric),
                csv_field(&row.unit),
                row.higher_is_better,
                row.vcpus,
                csv_field(&c.variant),
                c.n,
                med,
                lo,
                hi,
                f(rr.map(|r| r.ratio)),
                f(rr.map(|r| r.lo)),
                f(rr.map(|r| r.hi)),
                f(d.and_then(|d| d.p)),
                f(d.and_then(|d| d.q)),
                csv_field(d.map(|d| d.verdict.symbol()).unwrap_or("")),
                csv_field(c.failure.as_deref().unwrap_or_default())
            ));
        }
    }
    s
}

/// One CSV field as RFC 4180 wants it: quoted, with quotes doubled, when it
/// holds a comma, a quote or a line break (text from a guest can).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Key metrics (`bench` or `bench.metric`) that regressed; all metrics of
/// every benchmark when the matrix names none.
pub fn gate_failures(r: &Report, key_metrics: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for row in &r.rows {
        let key = key_metrics.is_empty()
            || key_metrics.iter().any(|k| k == &row.benchmark || *k == format!("{}.{}", row.benchmark, row.metric));
        if !key {
            continue;
        }
        for c in &row.cells {
            if let Some(d) = &c.decision {
                if d.verdict == Verdict::Regressed {
                    out.push(format!("{} {} at {} vCPUs: {} {}", c.variant, row.metric, row.vcpus, row.benchmark, decision_text(d)));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Host, RunMeta, Sample};

    fn meta() -> RunMeta {
        let y = "variants:\n  - name: base\n  - name: slow\n  - name: broken\nvcpus: [2]\n\
                 benchmarks:\n  - {name: d, kind: doexec}\nsampling: {boots: 1, repetitions: 8}\nkey_metrics: [d]\n";
        RunMeta {
            format_version: crate::store::FORMAT_VERSION,
            id: "r".into(),
            started: "t".into(),
            matrix: crate::config::parse(y, std::path::Path::new("/x/m.yaml"), None).unwrap(),
            host: Host::default(),
            harness_revision: None,
            clock: None,
        }
    }

    fn s(variant: &str, rep: u32, value: f64, warmup: bool) -> Sample {
        Sample {
            variant: variant.into(),
            vcpus: 2,
            benchmark: "d".into(),
            params: serde_json::json!({}),
            metric: "execs_per_s".into(),
            unit: "execs/s".into(),
            higher_is_better: true,
            boot_id: format!("{variant}-b0"),
            boot: 0,
            repetition: rep,
            warmup,
            value,
            series: vec![],
            cpu: None,
            clock: None,
            timestamp: "t".into(),
        }
    }

    #[test]
    fn cells_verdicts_failures_and_gate() {
        let mut samples = vec![s("base", 0, 1.0, true), s("slow", 0, 1.0, true)];
        for i in 1..=8 {
            let wiggle = 1.0 + 0.002 * i as f64;
            samples.push(s("base", i, 100.0 * wiggle, false));
            samples.push(s("slow", i, 80.0 * wiggle, false));
        }
        let events = vec![Event::Build {
            variant: "broken".into(),
            key: None,
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec!["x.c:1: error: y".into()],
            error: Some("build failed: x.c:1: error: y".into()),
        }];
        let r = build_from(&meta(), &samples, &events, None);
        assert_eq!(r.rows.len(), 1);
        let row = &r.rows[0];
        let base = &row.cells[0];
        assert_eq!((base.n, base.n_warmup), (8, 1), "warm-up kept apart");
        let slow = row.cells[1].decision.as_ref().unwrap();
        assert_eq!(slow.verdict, Verdict::Regressed);
        let broken = &row.cells[2];
        assert!(broken.summary.is_none());
        assert!(cell_text(broken).starts_with("FAILED: build failed: x.c:1: error: y"), "{}", cell_text(broken));
        assert_eq!(broken.decision.as_ref().unwrap().verdict, Verdict::Insufficient);
        let gate = gate_failures(&r, &["d".to_string()]);
        assert_eq!(gate.len(), 1);
        assert!(gate[0].starts_with("slow execs_per_s at 2 vCPUs"), "{gate:?}");
        assert!(gate_failures(&r, &["other".to_string()]).is_empty());
        let c = csv(&r);
        assert_eq!(c.lines().count(), 4);
        assert!(c.lines().nth(2).unwrap().contains(",regressed,"), "{c}");
        assert!(table(&r).contains("regressed"));
        assert!(!r.complete, "no boot_end events: the run is incomplete");
    }

    #[test]
    fn csv_quotes_guest_text() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("l1\nl2"), "\"l1\nl2\"");
        let events = vec![Event::Build {
            variant: "broken".into(),
            key: None,
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec![],
            error: Some("exited with 1: \"x\", then\nline 2".into()),
        }];
        let mut samples = vec![s("base", 1, 1.0, false)];
        samples[0].unit = "ops,\"s\"".into();
        let c = csv(&build_from(&meta(), &samples, &events, None));
        // a strict RFC 4180 reader: the broken row has 17 fields, its failure intact
        let rows = parse_csv(&c);
        assert!(rows.iter().all(|r| r.len() == 17), "{rows:?}");
        let broken = rows.iter().find(|r| r[5] == "broken").unwrap();
        assert!(broken[16].ends_with("exited with 1: \"x\", then\nline 2"), "{broken:?}");
        assert_eq!(broken[2], "ops,\"s\"");
    }

    /// A minimal RFC 4180 parser for the test.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let (mut rows, mut row, mut field, mut quoted, mut chars) = (vec![], vec![], String::new(), false, text.chars().peekable());
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        rows
    }
}
