//! `harness calibrate`: the base kernel run as two identical arms (A/A), to
//! measure a floor per (benchmark, metric, vCPUs, clock) from the boots of
//! both arms, and the rate at which the rule calls a change where there is
//! none. Calibrations are stored in the work directory with a fingerprint of
//! what they were measured under (host, matrix hash, profile, accelerator,
//! clock, vCPUs, sampling); a report applies one only when its fingerprint
//! fits the run, and otherwise says what differs and what to run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{Matrix, Variant};
use crate::records::{Event, RunMeta};
use crate::report::{Floors, Report};
use crate::stats::{self, Verdict};
use crate::workdir::WorkDir;

/// Name of the second arm.
pub const ARM_B: &str = "base-again";

/// Version of `calibration.json`.
const FILE_VERSION: u32 = 2;

/// What a calibration was measured under; it applies only to runs with the same.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fingerprint {
    /// Hostname and CPU count.
    pub host: String,
    /// sha256 of the matrix's kernel, guest, benchmarks and base variant.
    pub matrix_hash: String,
    /// Profile of the matrix (`None`: the nightly top level).
    pub profile: Option<String>,
    /// Accelerator the boots ran under (`tcg`, `kvm`).
    pub accel: String,
    /// Guest clock.
    pub clock: String,
    /// vCPU counts measured.
    pub vcpus: Vec<u32>,
    /// Boots per arm and vCPU count.
    pub boots: u32,
    /// Measured repetitions per boot.
    pub repetitions: u32,
    /// Warm-up repetitions per boot.
    pub warmup_repetitions: u32,
}

/// The floor of one (benchmark, metric, vCPUs, clock).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Floor {
    /// Benchmark.
    pub benchmark: String,
    /// Metric.
    pub metric: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Guest clock.
    pub clock: String,
    /// The floor ([`stats::aa_floor`]), a fraction.
    pub floor: f64,
    /// The A/A deviation actually seen.
    pub observed: f64,
    /// Relative boot-to-boot spread seen.
    pub spread: f64,
    /// Boots of each arm.
    pub boots: (usize, usize),
}

/// A stored calibration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    /// What it was measured under.
    pub fingerprint: Fingerprint,
    /// The A/A run.
    pub run_id: String,
    /// When.
    pub created: String,
    /// Floors per (benchmark, metric, vCPUs, clock).
    pub floors: Vec<Floor>,
    /// Fraction of A/A cells called regressed or improved.
    pub false_positive_rate: f64,
    /// A/A cells compared.
    pub cells: usize,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    calibrations: Vec<Calibration>,
}

/// The A/A matrix: base, and base again as a second arm, with every
/// benchmark base runs. Both arms share one kernel (same cache key).
pub fn aa_matrix(m: &Matrix) -> Matrix {
    let mut aa = m.clone();
    let base = m.variants[0].clone();
    aa.variants = vec![
        base.clone(),
        Variant {
            name: ARM_B.into(),
            ..base
        },
    ];
    aa
}

/// sha256 over what decides the measured kernel and its load: the kernel
/// section, guest settings, benchmarks with their parameters and the base
/// variant. Not the other variants, vCPUs or sampling (fingerprint fields of
/// their own), nor statistics or key metrics.
pub fn matrix_hash(m: &Matrix) -> String {
    let v = serde_json::json!([m.kernel, m.guest, m.benchmarks, m.variants.first()]);
    let d = Sha256::digest(v.to_string().as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The accelerator the run's boots came up under (`tcg`, `kvm`, both as
/// `kvm+tcg`, or `none` before any boot).
pub fn run_accel(events: &[Event]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in events {
        if let Event::Boot { accel, error: None, .. } = e {
            let a = format!("{accel:?}").to_lowercase();
            if !seen.contains(&a) {
                seen.push(a);
            }
        }
    }
    seen.sort();
    if seen.is_empty() {
        "none".into()
    } else {
        seen.join("+")
    }
}

/// The guest clock of a run: the one place the fingerprint and the floors take it from.
pub fn run_clock(meta: &RunMeta, events: &[Event]) -> String {
    match crate::report::run_clock(meta, events) {
        Some(c) => c.name().to_string(),
        // runs from before clocks were recorded: the accelerator stands for it
        None => run_accel(events),
    }
}

/// The fingerprint of a run.
pub fn fingerprint(meta: &RunMeta, events: &[Event]) -> Fingerprint {
    let m = &meta.matrix;
    Fingerprint {
        host: format!("{} ({} CPUs)", meta.host.hostname, meta.host.cpus),
        matrix_hash: matrix_hash(m),
        profile: m.profile.clone(),
        accel: run_accel(events),
        clock: run_clock(meta, events),
        vcpus: m.vcpus.clone(),
        boots: m.sampling.boots,
        repetitions: m.sampling.repetitions,
        warmup_repetitions: m.sampling.warmup_repetitions,
    }
}

/// Computes the calibration from an A/A run's report; `profile` is the
/// profile the user calibrated (the A/A run itself is named `calibrate-…`).
pub fn compute(r: &Report, meta: &RunMeta, events: &[Event], profile: Option<String>) -> Calibration {
    let clock = run_clock(meta, events);
    let mut floors = Vec::new();
    let (mut flagged, mut cells) = (0, 0);
    for row in &r.rows {
        let (Some(a), Some(b)) = (
            row.cells.iter().find(|c| c.variant == "base"),
            row.cells.iter().find(|c| c.variant == ARM_B),
        ) else {
            continue;
        };
        if let Some(f) = stats::aa_floor(&a.boots, &b.boots) {
            floors.push(Floor {
                benchmark: row.benchmark.clone(),
                metric: row.metric.clone(),
                vcpus: row.vcpus,
                clock: clock.clone(),
                floor: f.floor,
                observed: f.observed,
                spread: f.spread,
                boots: (a.n, b.n),
            });
        }
        if let Some(d) = b.decision.as_ref().filter(|d| d.verdict != Verdict::Insufficient) {
            cells += 1;
            flagged += usize::from(matches!(d.verdict, Verdict::Regressed | Verdict::Improved));
        }
    }
    Calibration {
        fingerprint: Fingerprint {
            profile,
            ..fingerprint(meta, events)
        },
        run_id: r.run_id.clone(),
        created: crate::util::now_rfc3339(),
        floors,
        false_positive_rate: if cells == 0 { 0.0 } else { flagged as f64 / cells as f64 },
        cells,
    }
}

/// What differs between a calibration's fingerprint and a run's, in words;
/// empty when the calibration fits (the run's vCPU counts may be a subset).
pub fn differences(cal: &Fingerprint, run: &Fingerprint) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, c: String, r: String| {
        if c != r {
            out.push(format!("{what}: calibrated {c}, this run {r}"));
        }
    };
    let profile = |p: &Option<String>| p.clone().unwrap_or_else(|| "(none)".into());
    differ("host", cal.host.clone(), run.host.clone());
    differ(
        "matrix (kernel, guest, benchmarks, base)",
        cal.matrix_hash.clone(),
        run.matrix_hash.clone(),
    );
    differ("profile", profile(&cal.profile), profile(&run.profile));
    differ("accelerator", cal.accel.clone(), run.accel.clone());
    differ("clock", cal.clock.clone(), run.clock.clone());
    let sampling = |f: &Fingerprint| {
        format!(
            "{} boots × {} (+{} warm-up)",
            f.boots, f.repetitions, f.warmup_repetitions
        )
    };
    differ("sampling", sampling(cal), sampling(run));
    let missing: Vec<String> = run
        .vcpus
        .iter()
        .filter(|v| !cal.vcpus.contains(v))
        .map(|v| v.to_string())
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "vCPUs: calibrated {:?}, this run also {}",
            cal.vcpus,
            missing.join(", ")
        ));
    }
    out
}

/// The stored calibration that fits the run, or why none does (naming what
/// differs in the closest one, and the command that makes one that fits).
pub fn select<'a>(cals: &'a [Calibration], run: &Fingerprint, matrix: &Path) -> Result<&'a Calibration, String> {
    if let Some(c) = cals.iter().rev().find(|c| differences(&c.fingerprint, run).is_empty()) {
        return Ok(c);
    }
    let profile = run
        .profile
        .as_ref()
        .map(|p| format!(" --profile {p}"))
        .unwrap_or_default();
    let todo = format!(
        "re-run `harness calibrate {}{profile}` with this matrix and profile",
        matrix.display()
    );
    let closest = cals.iter().rev().min_by_key(|c| differences(&c.fingerprint, run).len());
    Err(match closest {
        None => format!("none (no calibration for this host; {todo} to measure floors)"),
        Some(c) => format!(
            "none: calibration {} refused, it does not fit this run ({}); {todo}",
            c.run_id,
            differences(&c.fingerprint, run).join("; ")
        ),
    })
}

/// The floors of a fitting calibration at the run's clock.
pub fn floors_of(cal: &Calibration, clock: &str) -> Floors {
    let by_cell = cal
        .floors
        .iter()
        .filter(|f| f.clock == clock)
        .map(|f| ((f.benchmark.clone(), f.metric.clone(), f.vcpus), f.floor))
        .collect();
    Floors {
        by_cell,
        source: format!("calibration {} of {}", cal.run_id, cal.created),
    }
}

/// The floors a run's report should use: those of the stored calibration
/// that fits it, else none with the reason (which the report prints).
pub fn floors_for_run(work: &WorkDir, meta: &RunMeta, events: &[Event]) -> Floors {
    let run = fingerprint(meta, events);
    match load_all(work) {
        Err(e) => Floors::none(&format!("none ({e:#}; re-run `harness calibrate`)")),
        Ok(cals) => match select(&cals, &run, &meta.matrix.path) {
            Ok(c) => floors_of(c, &run_clock(meta, events)),
            Err(why) => Floors::none(&why),
        },
    }
}

/// Where calibrations live.
pub fn path(work: &WorkDir) -> PathBuf {
    work.calibration()
}

/// Every stored calibration (none when there is no file).
pub fn load_all(work: &WorkDir) -> Result<Vec<Calibration>> {
    let p = path(work);
    let data = match std::fs::read(&p) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("read calibration {}", p.display())),
    };
    let f: File = serde_json::from_slice(&data)
        .with_context(|| format!("read calibration {}: an older or damaged file", p.display()))?;
    anyhow::ensure!(
        f.version == FILE_VERSION,
        "read calibration {}: version {} (this harness reads {FILE_VERSION})",
        p.display(),
        f.version
    );
    Ok(f.calibrations)
}

/// Stores a calibration, replacing one with the same fingerprint: under
/// the lock `work/locks/calibration` (two calibrations ending together
/// both land), written whole ([`crate::util::write_whole`]: a crash leaves
/// the old store or the new one). A store that cannot be read is kept
/// aside as `calibration.json.unreadable-<time>`, never replaced; its
/// path is returned so the caller can say so.
pub fn save(work: &WorkDir, c: &Calibration) -> Result<Option<PathBuf>> {
    work.create()?;
    let by = format!("calibrate (pid {})", std::process::id());
    let _lock = crate::workdir::lock_waiting(work, "calibration", "the calibration store", &by, |_| {})?;
    let p = path(work);
    let (mut cals, kept) = match load_all(work) {
        Ok(cals) => (cals, None),
        Err(_) => {
            let aside = p.with_file_name(format!(
                "{}.unreadable-{}",
                p.file_name().unwrap_or_default().to_string_lossy(),
                crate::util::stamp()
            ));
            std::fs::rename(&p, &aside)
                .with_context(|| format!("keep the unreadable calibration store {} aside", p.display()))?;
            (Vec::new(), Some(aside))
        }
    };
    cals.retain(|x| x.fingerprint != c.fingerprint);
    cals.push(c.clone());
    let f = File {
        version: FILE_VERSION,
        calibrations: cals,
    };
    crate::util::write_whole(&p, &serde_json::to_vec_pretty(&f)?)?;
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aa_matrix_has_two_identical_arms() {
        let y = "variants:\n  - name: base\n  - name: v\n    benchmarks: [s]\nvcpus: [2]\nbenchmarks:\n  - {name: s, kind: doexec}\n";
        let m = crate::config::parse(y, Path::new("/x/m.yaml"), None).unwrap();
        let aa = aa_matrix(&m);
        assert_eq!(aa.variants.len(), 2);
        assert_eq!(aa.variants[1].name, ARM_B);
        assert!(aa.variants[1].is_plain());
        assert_eq!(aa.variants[0].benchmarks, aa.variants[1].benchmarks);
        assert_eq!(
            matrix_hash(&aa),
            matrix_hash(&m),
            "the A/A run fingerprints as the matrix it calibrates"
        );
    }

    use crate::records::Sample;
    use crate::report::tests::{boots, meta_with};

    /// An A/A run: execs_per_s steady (0.4% between boots), wall_s spread 5% between boots.
    fn aa_run() -> (RunMeta, Vec<Sample>, Vec<Event>) {
        let mut meta = meta_with(&["base", ARM_B], "{boots: 5, repetitions: 2}");
        meta.matrix.profile = Some("calibrate-quick".into());
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        boots(ARM_B, 5, 100.0, &mut rec);
        let wall: Vec<Sample> = rec
            .0
            .iter()
            .map(|s| {
                let b: f64 = s.boot_id.rsplit('b').next().unwrap().parse().unwrap();
                Sample {
                    metric: "wall_s".into(),
                    higher_is_better: false,
                    value: s.value * (1.0 + 0.05 * (b - 2.0)),
                    ..s.clone()
                }
            })
            .collect();
        rec.0.extend(wall);
        (meta, rec.0, rec.1)
    }

    fn calibration() -> (Calibration, RunMeta, Vec<Event>) {
        let (meta, samples, events) = aa_run();
        let r = crate::report::build_from(&meta, &samples, &events, &Floors::none("none"));
        (compute(&r, &meta, &events, Some("quick".into())), meta, events)
    }

    #[test]
    fn floors_are_per_metric_and_vcpus() {
        let (cal, _, _) = calibration();
        assert_eq!(
            cal.fingerprint.profile.as_deref(),
            Some("quick"),
            "the profile calibrated, not the A/A run's name"
        );
        assert_eq!(
            (cal.fingerprint.accel.as_str(), cal.fingerprint.clock.as_str()),
            ("tcg", "tcg")
        );
        let f = |m: &str| cal.floors.iter().find(|f| f.metric == m).unwrap();
        assert_eq!(cal.floors.len(), 2);
        let (execs, wall) = (f("execs_per_s"), f("wall_s"));
        assert_eq!((execs.vcpus, execs.boots, execs.clock.as_str()), (2, (5, 5), "tcg"));
        assert!(
            execs.floor < 0.02 && wall.floor > 0.05,
            "steady {} vs noisy {}",
            execs.floor,
            wall.floor
        );
        let floors = floors_of(&cal, "tcg");
        assert_eq!(floors.by_cell.get(&("d".into(), "wall_s".into(), 2)), Some(&wall.floor));
        assert!(
            floors_of(&cal, "icount").by_cell.is_empty(),
            "floors of another clock do not apply"
        );
    }

    #[test]
    fn a_calibration_that_does_not_fit_is_refused_with_what_differs() {
        let (cal, aa_meta, events) = calibration();
        let mut run = aa_meta.clone();
        run.matrix.profile = Some("quick".into());
        let fits = fingerprint(&run, &events);
        assert!(differences(&cal.fingerprint, &fits).is_empty());
        assert_eq!(
            select(std::slice::from_ref(&cal), &fits, Path::new("/x/m.yaml"))
                .unwrap()
                .run_id,
            cal.run_id
        );

        run.matrix.profile = Some("premerge".into());
        run.matrix.sampling.boots = 6;
        run.matrix.guest.memory_mib += 1;
        let other = fingerprint(&run, &events);
        let why = select(std::slice::from_ref(&cal), &other, Path::new("/x/m.yaml")).unwrap_err();
        assert!(
            why.contains("refused") && why.contains("profile: calibrated quick, this run premerge"),
            "{why}"
        );
        assert!(
            why.contains("sampling: calibrated 5 boots × 2 (+1 warm-up), this run 6 boots × 2 (+1 warm-up)"),
            "{why}"
        );
        assert!(why.contains("matrix (kernel, guest, benchmarks, base)"), "{why}");
        assert!(
            why.contains("re-run `harness calibrate /x/m.yaml --profile premerge`"),
            "{why}"
        );
        assert!(!why.contains("accelerator") && !why.contains("host"), "{why}");
        let mut more_vcpus = fits.clone();
        more_vcpus.vcpus.push(8);
        assert_eq!(
            differences(&cal.fingerprint, &more_vcpus),
            ["vCPUs: calibrated [2], this run also 8"]
        );
        let mut subset = cal.fingerprint.clone();
        subset.vcpus = vec![2, 4];
        assert!(
            differences(&subset, &fits).is_empty(),
            "a run at fewer vCPU counts fits"
        );
    }

    #[test]
    fn stored_calibrations_are_applied_only_where_they_fit() {
        let tmp = tempfile::tempdir().unwrap();
        let work = WorkDir::at(tmp.path());
        let (cal, aa_meta, events) = calibration();
        let mut run = aa_meta.clone();
        run.matrix.profile = Some("quick".into());
        assert!(floors_for_run(&work, &run, &events)
            .source
            .starts_with("none (no calibration"));
        save(&work, &cal).unwrap();
        save(&work, &cal).unwrap();
        assert_eq!(load_all(&work).unwrap().len(), 1, "same fingerprint: replaced");
        let applied = floors_for_run(&work, &run, &events);
        assert_eq!(
            (applied.by_cell.len(), applied.source.starts_with("calibration r of")),
            (2, true),
            "{}",
            applied.source
        );
        run.matrix.sampling.repetitions = 3;
        let refused = floors_for_run(&work, &run, &events);
        assert!(
            refused.by_cell.is_empty() && refused.source.contains("refused"),
            "{}",
            refused.source
        );
        std::fs::write(path(&work), r#"{"host": "h (2 CPUs)", "noise_floor": 0.03}"#).unwrap();
        let old = floors_for_run(&work, &run, &events);
        assert!(
            old.by_cell.is_empty() && old.source.contains("an older or damaged file"),
            "{}",
            old.source
        );
    }

    /// Issue 58: an unreadable store is kept aside, not replaced, and two
    /// calibrations saved at once both land in a store that reads whole.
    #[test]
    fn an_unreadable_store_is_kept_and_concurrent_saves_both_land() {
        let tmp = tempfile::tempdir().unwrap();
        let work = WorkDir::at(tmp.path());
        work.create().unwrap();
        let damaged = br#"{"version": 1, "calibrations": [{"finger"#;
        std::fs::write(path(&work), damaged).unwrap();
        let (cal, _, _) = calibration();
        let kept = save(&work, &cal).unwrap().expect("the damaged store kept");
        assert_eq!(std::fs::read(&kept).unwrap(), damaged);
        assert!(kept
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("calibration.json.unreadable-"));
        assert_eq!(load_all(&work).unwrap().len(), 1);

        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (work, mut c) = (WorkDir::at(tmp.path()), cal.clone());
                c.fingerprint.profile = Some(format!("p{i}"));
                std::thread::spawn(move || save(&work, &c).unwrap())
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), None);
        }
        assert_eq!(load_all(&work).unwrap().len(), 9, "every save landed");
    }
}
