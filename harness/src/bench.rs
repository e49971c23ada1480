//! The benchmark catalog: the guest command line of each benchmark (built
//! only from typed numbers and fixed words, never from matrix strings), and
//! the parsers that turn guest output into samples: the `sample ...` line
//! protocol of the programs in `images/`, test_vmalloc's `Summary:` lines,
//! and `/proc/stat` idle/steal over the sample window.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::config::{BenchKind, Benchmark, Link, Matrix};

pub mod program;

pub use crate::config::{
    metric_names, per_call_metric, syscall_names, unit_of_work, works_in_syscalls, INSNS_PER_OP, SYSCALL_HANDLER,
    VMALLOC_TESTS,
};

/// The guest shell command for one repetition.
pub fn command(b: &Benchmark, nproc: u32) -> String {
    let t = b.timeout_s;
    match &b.kind {
        BenchKind::Doexec { link, .. } => {
            let prog = match link {
                Link::Static => "doexec-static",
                Link::Shared => "doexec-shared",
            };
            format!("/bench/run {t} /bench/{prog} {}", sampler_args(&b.kind, nproc))
        }
        BenchKind::ForkPrlimit { fanout, iterations, usleep_us } => {
            format!("/bench/run {t} /bench/forkprlimit -f {fanout} -i {iterations} -u {usleep_us}")
        }
        BenchKind::ForkExec { .. } => {
            format!("/bench/run {t} /bench/forkexec {} -p /bin/true", sampler_args(&b.kind, nproc))
        }
        BenchKind::TestVmalloc {
            nr_threads,
            run_test_mask,
            test_repeat_count,
            test_loop_count,
            sequential_test_order,
            nr_pages,
        } => format!(
            "dmesg -c >/dev/null; echo \"uptime0 $(cat /proc/uptime)\"; echo \"stat0 $(head -n1 /proc/stat)\"; \
             /bench/profmark open; \
             timeout -s KILL {t} insmod /lib/modules/test_vmalloc.ko nr_threads={threads} run_test_mask={run_test_mask} \
             test_repeat_count={test_repeat_count} test_loop_count={test_loop_count} \
             sequential_test_order={} nr_pages={nr_pages}; echo \"insmod_status=$?\"; \
             /bench/profmark close {ops}; \
             echo \"stat1 $(head -n1 /proc/stat)\"; echo \"uptime1 $(cat /proc/uptime)\"; dmesg",
            *sequential_test_order as u8,
            threads = nr_threads.resolve(nproc),
            // the profiler window's operations: one per test loop of each thread
            ops = u64::from(nr_threads.resolve(nproc)) * u64::from(*test_loop_count) * u64::from(*test_repeat_count),
        ),
        BenchKind::Program {
            executable,
            args,
            workers,
            duration_s,
            ops,
            user,
            ..
        } => program::command(
            &program::Invocation {
                program: &executable.guest_path(&b.name),
                args,
                workers: *workers,
                duration_s: *duration_s,
                user: *user,
                counts_ops: ops.is_some(),
            },
            t,
            nproc,
        ),
    }
}

/// The sampler's arguments of doexec and forkexec (`-w -d [-m] -W`); `-m`
/// only for samples other than a second's, so the command of a run
/// recorded before `sample_ms` reads the same. Empty for other kinds.
fn sampler_args(kind: &BenchKind, nproc: u32) -> String {
    let (BenchKind::Doexec {
        workers,
        duration_s,
        sample_ms,
        warmup_s,
        ..
    }
    | BenchKind::ForkExec {
        workers,
        duration_s,
        sample_ms,
        warmup_s,
    }) = kind
    else {
        return String::new();
    };
    let m = if *sample_ms == 1000 {
        String::new()
    } else {
        format!(" -m {sample_ms}")
    };
    format!("-w {} -d {duration_s}{m} -W {warmup_s}", workers.resolve(nproc))
}

/// Guest seconds a repetition took, from the `uptime0`/`uptime1` lines the
/// guest prints around it.
pub fn guest_span(stdout: &str) -> Option<f64> {
    let at = |tag: &str| -> Option<f64> {
        let l = stdout.lines().find(|l| l.starts_with(tag))?;
        l[tag.len()..]
            .split_whitespace()
            .next()?
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
    };
    let (a, b) = (at("uptime0 ")?, at("uptime1 ")?);
    (b >= a).then_some(b - a)
}

/// Rough guest memory (MiB) a benchmark needs beyond the kernel's own,
/// for the preflight warning.
pub fn memory_need_mib(b: &Benchmark, vcpus: u32) -> u64 {
    match &b.kind {
        // each worker's binary copy lives in RAM-backed /tmp (~0.8 MiB static)
        BenchKind::Doexec {
            link: Link::Static,
            workers,
            ..
        } => 64 + workers.resolve(vcpus) as u64,
        BenchKind::Doexec { .. } | BenchKind::ForkExec { .. } | BenchKind::Program { .. } => 64 + vcpus as u64 / 4,
        BenchKind::ForkPrlimit { fanout, .. } => 64 + (2u64 << fanout) / 4,
        BenchKind::TestVmalloc {
            nr_threads,
            run_test_mask,
            ..
        } => {
            // per thread, at once: full_fit_alloc_test (mask bit 1) holds
            // 2 × fls(nr_cpus) × 32 MiB of single-page areas, long_busy_list
            // (bit 2) 15000 pages; the rest a few MiB
            let fls = 32 - vcpus.leading_zeros() as u64;
            let full_fit = if run_test_mask & 0b10 != 0 { fls * 64 } else { 0 };
            let busy = if run_test_mask & 0b100 != 0 { 60 } else { 0 };
            let per = full_fit.max(busy).max(8);
            64 + per * nr_threads.resolve(vcpus) as u64
        }
    }
}

/// The benchmarks of `m` that will not fit in its guest's memory at `vcpus`,
/// each with the memory it needs: its own need plus 128 MiB for the kernel.
pub fn short_of_memory(m: &Matrix, vcpus: u32) -> Vec<(&Benchmark, u64)> {
    m.benchmarks
        .iter()
        .map(|b| (b, memory_need_mib(b, vcpus) + 128))
        .filter(|&(_, need)| need > m.guest.memory_mib)
        .collect()
}

/// One repetition's value of one metric.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    /// Metric name.
    pub metric: String,
    /// The repetition's value: the mean of the measured per-second values,
    /// or the single value the program printed.
    pub value: f64,
    /// Unit.
    pub unit: String,
    /// Direction of "better".
    pub higher_is_better: bool,
    /// Per-second values after warm-up (empty for one-shot metrics).
    pub series: Vec<f64>,
    /// Per-second values of the warm-up intervals.
    pub warmup_series: Vec<f64>,
}

pub use crate::vocab::CpuWindow;

/// Everything parsed from one repetition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// Metrics.
    pub metrics: Vec<Measured>,
    /// `info` key/values.
    pub info: BTreeMap<String, String>,
    /// CPU window.
    pub cpu: Option<CpuWindow>,
    /// The operation count the output gave (a `program` with `ops:`).
    pub ops: Option<u64>,
}

fn stat_fields(l: &str) -> Option<Vec<u64>> {
    let rest = l.split_whitespace().skip_while(|w| *w != "cpu").skip(1);
    let v: Vec<u64> = rest.filter_map(|w| w.parse().ok()).collect();
    (v.len() >= 8).then_some(v)
}

/// Idle and steal fractions between two `cpu` lines of /proc/stat.
pub fn cpu_window(before: &str, after: &str) -> Option<CpuWindow> {
    let a = stat_fields(before)?;
    let b = stat_fields(after)?;
    let d: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y.saturating_sub(*x) as f64).collect();
    // user nice system idle iowait irq softirq steal (guest, guest_nice are in user)
    let total: f64 = d.iter().take(8).sum();
    if total <= 0.0 {
        return None;
    }
    Some(CpuWindow {
        idle: (d[3] + d[4]) / total,
        steal: d[7] / total,
    })
}

/// One metric's lines: (unit, higher is better, [(t, value, warm-up)]).
type MetricLines = (String, bool, Vec<Point>);

/// One `sample` line's (t, value, warm-up).
type Point = (Option<u32>, f64, bool);

/// Parses the `sample`/`info` protocol and the runner's stat lines.
pub fn parse_samples(out: &str) -> Result<Parsed> {
    let mut p = Parsed::default();
    let mut stat0 = None;
    let mut stat1 = None;
    let mut by: BTreeMap<String, MetricLines> = BTreeMap::new();
    for (i, line) in out.lines().enumerate() {
        let line = line.trim();
        if let Some(r) = line.strip_prefix("stat0 ") {
            stat0 = Some(r.to_string());
        } else if let Some(r) = line.strip_prefix("stat1 ") {
            stat1 = Some(r.to_string());
        } else if let Some(r) = line.strip_prefix("info ") {
            for kv in r.split_whitespace() {
                if let Some((k, v)) = kv.split_once('=') {
                    p.info.insert(k.into(), v.into());
                }
            }
        } else if let Some(r) = line.strip_prefix("sample ") {
            let (metric, unit, hib, point) = sample_line(r).map_err(|e| anyhow::anyhow!("line {}: {e}", i + 1))?;
            if by.len() == MAX_METRICS && !by.contains_key(&metric) {
                bail!(
                    "line {}: metric {metric}: more than {MAX_METRICS} distinct metric names in one repetition: \
                     the benchmark prints a new name per value (keep the name fixed, vary the value)",
                    i + 1
                );
            }
            by.entry(metric)
                .or_insert_with(|| (unit, hib, Vec::new()))
                .2
                .push(point);
        }
    }
    for (metric, lines) in by {
        p.metrics.push(measured(metric, lines)?);
    }
    if let (Some(a), Some(b)) = (stat0, stat1) {
        p.cpu = cpu_window(&a, &b);
    }
    Ok(p)
}

/// One `sample` line (after the word): its metric, unit, direction and
/// `(t, value, warm-up)`.
fn sample_line(r: &str) -> Result<(String, String, bool, Point)> {
    let kv: BTreeMap<&str, &str> = r.split_whitespace().filter_map(|w| w.split_once('=')).collect();
    let get = |k: &str| kv.get(k).copied();
    let (Some(metric), Some(value), Some(unit), Some(better)) =
        (get("metric"), get("value"), get("unit"), get("better"))
    else {
        bail!("`sample {r}` lacks metric, value, unit or better");
    };
    let value: f64 = value
        .parse()
        .map_err(|_| anyhow::anyhow!("value `{value}` is not a number"))?;
    if !value.is_finite() {
        bail!("value `{value}` is not finite");
    }
    let hib = match better {
        "higher" => true,
        "lower" => false,
        o => bail!("better=`{o}` is not higher or lower"),
    };
    let t = get("t").and_then(|t| t.parse().ok());
    let warm = get("warmup") == Some("1");
    Ok((metric.to_string(), unit.to_string(), hib, (t, value, warm)))
}

/// The most distinct metric names one repetition may print (a few in
/// every shipped benchmark): each name is a row of every report, so a
/// guest printing 20,000 of them took the run's end 14 minutes and wrote a
/// 38 MB report.html.
pub const MAX_METRICS: usize = 256;

/// The most per-interval values one metric of one repetition may print (a
/// day of seconds): more is a guest printing in a loop, refused before it
/// fills `samples.jsonl`.
pub const MAX_SERIES: usize = 86_400;

/// A metric's repetition value from its lines: the mean of the measured
/// per-second values, or the last one-shot value.
fn measured(metric: String, (unit, hib, vals): MetricLines) -> Result<Measured> {
    if vals.len() > MAX_SERIES {
        bail!(
            "metric {metric}: {} values in one repetition, over the cap of {MAX_SERIES} (a day of per-second values): the benchmark prints in a loop",
            vals.len()
        );
    }
    let series: Vec<f64> = vals.iter().filter(|v| v.0.is_some() && !v.2).map(|v| v.1).collect();
    let warmup_series: Vec<f64> = vals.iter().filter(|v| v.2).map(|v| v.1).collect();
    let value = if vals.iter().any(|v| v.0.is_some()) {
        if series.is_empty() {
            bail!("metric {metric}: only warm-up intervals were printed");
        }
        series.iter().sum::<f64>() / series.len() as f64
    } else {
        vals.last().map(|v| v.1).unwrap_or(f64::NAN)
    };
    if !value.is_finite() {
        bail!("metric {metric}: the mean of its values is not finite ({value}); the values overflow");
    }
    Ok(Measured {
        metric,
        value,
        unit,
        higher_is_better: hib,
        series,
        warmup_series,
    })
}

/// Parses test_vmalloc's dmesg output: one metric per test, the mean over
/// threads of each thread's `avg` (usec, lower is better). A test with
/// `failed: N>0` in any thread is an error, as is a run with no summary.
pub fn parse_vmalloc(out: &str) -> Result<Parsed> {
    let mut p = parse_samples(out).unwrap_or_default();
    p.metrics.clear();
    let mut by: BTreeMap<String, (Vec<f64>, u64, u64)> = BTreeMap::new();
    for line in out.lines() {
        let Some(r) = line.split("Summary: ").nth(1) else {
            continue;
        };
        let w: Vec<&str> = r.split_whitespace().collect();
        // <test> passed: N failed: N repeat: R loops: L avg: X usec
        if w.len() < 11 || w[1] != "passed:" || w[3] != "failed:" || w[9] != "avg:" {
            bail!("unexpected test_vmalloc summary `{}`", line.trim());
        }
        let num = |s: &str| -> Result<u64> {
            s.parse()
                .map_err(|_| anyhow::anyhow!("bad number `{s}` in `{}`", line.trim()))
        };
        let e = by.entry(w[0].to_string()).or_default();
        e.0.push(num(w[10])? as f64);
        e.1 += num(w[2])?;
        e.2 += num(w[4])?;
    }
    if by.is_empty() {
        let why = out
            .lines()
            .filter(|l| l.contains("insmod") || l.contains("test_vmalloc"))
            .collect::<Vec<_>>()
            .join("; ");
        bail!(
            "test_vmalloc printed no summary ({})",
            if why.is_empty() { "no output" } else { &why }
        );
    }
    for (test, (avgs, passed, failed)) in by {
        if failed > 0 {
            bail!("test_vmalloc {test}: {failed} failed, {passed} passed");
        }
        p.info.insert(format!("{test}.passed"), passed.to_string());
        p.metrics.push(Measured {
            metric: test,
            value: avgs.iter().sum::<f64>() / avgs.len() as f64,
            unit: "usec".into(),
            higher_is_better: false,
            series: avgs,
            warmup_series: vec![],
        });
    }
    Ok(p)
}

/// A repetition that ran and made no progress: a rate (a higher-is-better
/// metric) of 0 in every interval, such as a doexec whose workers never
/// ran (`measured_execs=0`). A 0 is no measurement: the repetition fails.
#[derive(Debug, Clone, PartialEq)]
pub struct NoProgress {
    /// The metric that stayed at 0.
    pub metric: String,
    /// The counts the benchmark printed (`info measured_…=`), as `k=v`.
    pub counted: String,
}

impl std::fmt::Display for NoProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no progress: {} was 0 in every interval", self.metric)?;
        if !self.counted.is_empty() {
            write!(f, " ({})", self.counted)?;
        }
        Ok(())
    }
}

impl std::error::Error for NoProgress {}

/// Parses one repetition's output (stdout; a `program` reads stderr too)
/// for its benchmark; a rate of 0 is [`NoProgress`].
pub fn parse(b: &Benchmark, out: &str, err: &str) -> Result<Parsed> {
    match &b.kind {
        BenchKind::TestVmalloc { .. } => parse_vmalloc(out),
        kind => {
            let p = match kind {
                BenchKind::Program { metrics, ops, .. } => program::parse(metrics, ops.as_ref(), out, err)?,
                _ => parse_samples(out)?,
            };
            if p.metrics.is_empty() {
                bail!("the benchmark printed no sample line");
            }
            if let Some(m) = p.metrics.iter().find(|m| m.higher_is_better && m.value == 0.0) {
                let counted: Vec<String> = p
                    .info
                    .iter()
                    .filter(|(k, _)| k.starts_with("measured_"))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                return Err(NoProgress {
                    metric: m.metric.clone(),
                    counted: counted.join(" "),
                }
                .into());
            }
            Ok(p)
        }
    }
}

/// The metric a benchmark is judged by first (gates, summaries): a
/// `program`'s first declared metric.
pub fn primary_metric(b: &Benchmark) -> Option<&str> {
    match &b.kind {
        BenchKind::Doexec { .. } => Some("execs_per_s"),
        BenchKind::ForkPrlimit { .. } => Some("iterations_per_s"),
        BenchKind::ForkExec { .. } => Some("forkexecs_per_s"),
        BenchKind::TestVmalloc { .. } => None,
        BenchKind::Program { metrics, .. } => metrics.first().map(|m| m.name.as_str()),
    }
}

/// A benchmark whose worker count is the guest's CPU count (`workers: nproc`):
/// its throughput against vCPUs can be read against linear scaling.
pub fn workers_follow_vcpus(b: &Benchmark) -> bool {
    use crate::config::{Count, NprocWord};
    match &b.kind {
        &BenchKind::Doexec { workers, .. } | &BenchKind::ForkExec { workers, .. } => {
            workers == Count::Named(NprocWord::Nproc)
        }
        // a program's workers follow the vCPUs where it is told their count
        BenchKind::Program { workers, args, .. } => {
            *workers == Count::Named(NprocWord::Nproc) && args.iter().any(|a| a.contains("{workers}"))
                || args.iter().any(|a| a.contains("{nproc}"))
        }
        BenchKind::ForkPrlimit { .. } | BenchKind::TestVmalloc { .. } => false,
    }
}

/// Comparisons a report of the matrix makes, all in one Benjamini-Hochberg
/// pass: every non-base variant's benchmarks × their metrics × vCPU counts.
/// Under the instruction-counting clock with kernel profiles (its default)
/// every benchmark reports [`INSNS_PER_OP`] as metrics too, and one whose
/// unit of work is system calls each handler's instructions per call.
pub fn comparison_count(m: &Matrix) -> usize {
    let reported = |b: &Benchmark| {
        let profiled = if m.guest.kernel_profile {
            INSNS_PER_OP.len() + syscall_names(&unit_of_work(b)).count()
        } else {
            0
        };
        metric_count(b) + profiled
    };
    let per_vcpu: usize = m
        .variants
        .iter()
        .skip(1)
        .flat_map(|v| &v.benchmarks)
        .filter_map(|b| m.benchmark(b))
        .map(reported)
        .sum();
    per_vcpu * m.vcpus.len()
}

/// How many metrics one repetition of the benchmark reports (test_vmalloc:
/// one per test in its `run_test_mask`).
pub fn metric_count(b: &Benchmark) -> usize {
    match &b.kind {
        BenchKind::Program { metrics, .. } => metrics.len().max(1),
        BenchKind::Doexec { .. } | BenchKind::ForkExec { .. } => 1,
        BenchKind::ForkPrlimit { .. } => 2,
        &BenchKind::TestVmalloc { run_test_mask, .. } => run_test_mask.count_ones().max(1) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 448-vCPU doexec of issue 19: 0 execs/s in every second is no
    /// measurement; a rate that is 0 only in some seconds, or a lower-is-
    /// better metric of 0, still is one.
    #[test]
    fn a_rate_of_zero_is_no_progress() {
        let m = crate::config::parse(
            "variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {name: s, kind: doexec}\n  - {name: f, kind: fork_prlimit}\n",
            std::path::Path::new("/nonexistent/m.yaml"),
            None,
        )
        .unwrap();
        let (doexec, fork) = (&m.benchmarks[0], &m.benchmarks[1]);
        let line = |v: f64, t: u32| format!("sample metric=execs_per_s value={v} unit=execs/s better=higher t={t}\n");
        let cases: [(&Benchmark, String, Option<&str>); 5] = [
            (doexec, format!("{}{}info measured_execs=0 workers=448\n", line(0.0, 0), line(0.0, 1)), Some("no progress: execs_per_s was 0 in every interval (measured_execs=0)")),
            (doexec, format!("{}{}", line(0.0, 0), line(0.0, 1)), Some("no progress: execs_per_s was 0 in every interval")),
            (doexec, format!("{}{}info measured_execs=7\n", line(0.0, 0), line(14.0, 1)), None),
            (fork, "sample metric=wall_s value=0 unit=s better=lower\nsample metric=iterations_per_s value=5 unit=iter/s better=higher\n".into(), None),
            (fork, "sample metric=wall_s value=2 unit=s better=lower\nsample metric=iterations_per_s value=0 unit=iter/s better=higher\n".into(), Some("no progress: iterations_per_s was 0 in every interval")),
        ];
        for (b, out, want) in cases {
            match (parse(b, &out, ""), want) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => {
                    assert_eq!(e.to_string(), w, "{out}");
                    assert!(e.downcast_ref::<NoProgress>().is_some(), "{out}");
                }
                (got, want) => panic!("{out}: got {:?}, want {want:?}", got.map(|p| p.metrics)),
            }
        }
    }

    #[test]
    fn guest_span_reads_the_uptime_lines() {
        let out = "uptime0 10.50 3.0\nstat0 cpu 1 2 3\nsample metric=x value=1\nstat1 cpu 2 3 4\nuptime1 16.75 4.0\n";
        assert_eq!(guest_span(out), Some(6.25));
        assert_eq!(guest_span("uptime0 10.5 1\n"), None);
        assert_eq!(
            guest_span("uptime0 10.5 1\nuptime1 9 1\n"),
            None,
            "time does not run backwards"
        );
        assert_eq!(guest_span("uptime0 inf 1\nuptime1 9 1\n"), None);
    }
    use crate::config::Count;

    fn bench(kind: BenchKind) -> Benchmark {
        Benchmark {
            name: "x".into(),
            kind,
            timeout_s: 60,
        }
    }

    #[test]
    fn commands_are_built_from_numbers_only() {
        let d = bench(BenchKind::Doexec {
            link: Link::Shared,
            workers: Count::Named(crate::config::NprocWord::Nproc),
            duration_s: 5,
            sample_ms: 1000,
            warmup_s: 1,
        });
        assert_eq!(command(&d, 26), "/bench/run 60 /bench/doexec-shared -w 26 -d 5 -W 1");
        let short = bench(BenchKind::ForkExec {
            workers: Count::Fixed(256),
            duration_s: 1,
            sample_ms: 50,
            warmup_s: 0,
        });
        assert_eq!(
            command(&short, 256),
            "/bench/run 60 /bench/forkexec -w 256 -d 1 -m 50 -W 0 -p /bin/true"
        );
        let f = bench(BenchKind::ForkPrlimit {
            fanout: 6,
            iterations: 5000,
            usleep_us: 1000,
        });
        assert_eq!(command(&f, 4), "/bench/run 60 /bench/forkprlimit -f 6 -i 5000 -u 1000");
        let v = bench(BenchKind::TestVmalloc {
            nr_threads: Count::Fixed(2),
            run_test_mask: 7,
            test_repeat_count: 1,
            test_loop_count: 1000,
            sequential_test_order: false,
            nr_pages: 1,
        });
        let c = command(&v, 4);
        assert!(c.contains("insmod /lib/modules/test_vmalloc.ko nr_threads=2 run_test_mask=7 test_repeat_count=1 test_loop_count=1000 sequential_test_order=0 nr_pages=1"), "{c}");
        // the profiler window brackets the insmod, its ops one per loop of each thread
        let (open, insmod, close) = (
            c.find("/bench/profmark open;"),
            c.find("insmod /lib"),
            c.find("/bench/profmark close 2000;"),
        );
        assert!(
            open.is_some() && close.is_some() && open < insmod && insmod < close,
            "{c}"
        );
    }

    /// Issue 47: distinct metric names have a cap per repetition; the
    /// repetition past it fails, naming the line and the metric.
    #[test]
    fn metric_names_past_the_cap_are_refused() {
        let line = |n: usize| format!("sample metric=m{n} value=1 unit=x better=higher\n");
        let at_cap: String = (0..MAX_METRICS).map(line).chain([line(0)]).collect();
        assert_eq!(parse_samples(&at_cap).unwrap().metrics.len(), MAX_METRICS);
        let over: String = (0..=MAX_METRICS).map(line).collect();
        let e = format!("{:#}", parse_samples(&over).unwrap_err());
        assert!(
            e.starts_with("line 257: metric m256: more than 256 distinct metric names in one repetition"),
            "{e}"
        );
    }

    /// Issue 30: the per-second series has a cap of its own.
    #[test]
    fn a_series_past_the_cap_is_refused() {
        let line = |t: usize| format!("sample metric=m value=1 unit=x/s better=higher t={t}\n");
        let at_cap: String = (0..MAX_SERIES).map(line).collect();
        assert_eq!(parse_samples(&at_cap).unwrap().metrics[0].series.len(), MAX_SERIES);
        let over: String = (0..=MAX_SERIES).map(line).collect();
        let e = format!("{:#}", parse_samples(&over).unwrap_err());
        assert!(
            e.contains("86401 values in one repetition, over the cap of 86400"),
            "{e}"
        );
    }

    #[test]
    fn per_second_samples_average_after_warmup() {
        let out = "stat0 cpu  100 0 100 800 0 0 0 0 0 0\n\
            sample metric=execs_per_s value=10.0 unit=execs/s better=higher t=0 warmup=1\n\
            sample metric=execs_per_s value=100.0 unit=execs/s better=higher t=1\n\
            sample metric=execs_per_s value=110.0 unit=execs/s better=higher t=2\n\
            info workers=2\n\
            stat1 cpu  200 0 200 900 0 0 0 100 0 0\n";
        let p = parse_samples(out).unwrap();
        assert_eq!(p.metrics.len(), 1);
        let m = &p.metrics[0];
        assert_eq!((m.value, m.higher_is_better, m.unit.as_str()), (105.0, true, "execs/s"));
        assert_eq!(m.series, vec![100.0, 110.0]);
        assert_eq!(m.warmup_series, vec![10.0]);
        assert_eq!(p.info["workers"], "2");
        let cpu = p.cpu.unwrap();
        assert!(
            (cpu.idle - 0.25).abs() < 1e-9 && (cpu.steal - 0.25).abs() < 1e-9,
            "{cpu:?}"
        );
    }

    #[test]
    fn vmalloc_memory_follows_the_module() {
        let need = |vcpus, mask| {
            let b = bench(BenchKind::TestVmalloc {
                nr_threads: Count::Named(crate::config::NprocWord::Nproc),
                run_test_mask: mask,
                test_repeat_count: 1,
                test_loop_count: 1,
                sequential_test_order: false,
                nr_pages: 1,
            });
            memory_need_mib(&b, vcpus)
        };
        // 448 CPUs: fls = 9, 576 MiB per thread in full_fit (the seed's figure)
        assert_eq!(need(448, 7), 64 + 576 * 448);
        assert_eq!(need(26, 2), 64 + 320 * 26);
        assert_eq!(need(26, 4), 64 + 60 * 26);
        assert_eq!(need(4, 1), 64 + 8 * 4);
    }

    #[test]
    fn one_shot_metrics_and_bad_lines() {
        let p = parse_samples("sample metric=wall_s value=1.5 unit=s better=lower\n").unwrap();
        assert_eq!((p.metrics[0].value, p.metrics[0].higher_is_better), (1.5, false));
        assert!(parse_samples("sample metric=a value=x unit=s better=lower\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
        assert!(parse_samples("sample metric=a value=1 unit=s better=up\n").is_err());
        assert!(parse_samples("sample metric=a value=1 unit=s better=higher t=0 warmup=1\n").is_err());
    }

    #[test]
    fn non_finite_values_fail_the_repetition() {
        for v in ["inf", "-inf", "nan", "NaN", "infinity", "1e999"] {
            let e = parse_samples(&format!("sample metric=a value={v} unit=s better=lower\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("line 1") && e.contains("not finite"), "{v}: {e}");
        }
        // each value is finite, their mean overflows to infinity
        let out = "sample metric=a value=1.7e308 unit=x better=higher t=1\nsample metric=a value=1.7e308 unit=x better=higher t=2\n";
        let e = parse_samples(out).unwrap_err().to_string();
        assert!(e.contains("metric a") && e.contains("not finite"), "{e}");
        let b = bench(BenchKind::ForkPrlimit {
            fanout: 1,
            iterations: 1,
            usleep_us: 1,
        });
        assert!(parse(&b, out, "").is_err());
    }

    #[test]
    fn vmalloc_summaries() {
        let out = "[ 1.0] Summary: fix_size_alloc_test passed: 1 failed: 0 repeat: 1 loops: 1000 avg: 100 usec\n\
                   [ 1.0] Summary: fix_size_alloc_test passed: 1 failed: 0 repeat: 1 loops: 1000 avg: 300 usec\n\
                   [ 1.0] Summary: full_fit_alloc_test passed: 1 failed: 0 repeat: 1 loops: 1000 avg: 50 usec\n\
                   [ 1.0] All test took worker0=123 cycles\ninsmod_status=1\n";
        let p = parse_vmalloc(out).unwrap();
        assert_eq!(p.metrics.len(), 2);
        assert_eq!(
            (p.metrics[0].metric.as_str(), p.metrics[0].value),
            ("fix_size_alloc_test", 200.0)
        );
        assert!(!p.metrics[0].higher_is_better);
        assert_eq!(p.info["fix_size_alloc_test.passed"], "2");
        let bad = out.replace(
            "failed: 0 repeat: 1 loops: 1000 avg: 50",
            "failed: 3 repeat: 1 loops: 1000 avg: 50",
        );
        assert!(parse_vmalloc(&bad).unwrap_err().to_string().contains("3 failed"));
        assert!(parse_vmalloc("insmod: can't insert\n").is_err());
    }
}
