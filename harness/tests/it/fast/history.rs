//! The nightly history end to end through the `harness` binary: run
//! directories imported (twice: the second changes nothing), the trends
//! printed, and the HTML trend page opened in a real headless browser
//! (Debian's chromium) with every trend laid out and every point linking to
//! its run's report.
//!
//! `real_runs_*` takes at least five real run directories of this host
//! (quick profile or the icount clock) from `tests/fixtures/history-runs/`
//! or `$HARNESS_HISTORY_RUNS`; only their `run.json`, `samples.jsonl` and
//! `events.jsonl` are needed.

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::records::{Accel, MeasureClock};
use harness::records::{Event, Host, RunMeta, Sample};

fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("this test needs Debian's chromium (apt-get install --no-install-recommends chromium)")
}

fn harness(work: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_WORK_DIR", work)
        .env("HARNESS_HISTORY_DB", work.join("history.sqlite"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "harness {args:?}: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The DOM of `page` as chromium lays it out.
fn dom(page: &Path, profile: &Path) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Imports `runs` twice, calls `between`, prints the trends, writes the page
/// and opens it; returns the page's DOM and the number of series.
fn import_and_open(work: &Path, runs: &[PathBuf], between: impl Fn()) -> (String, usize) {
    let dirs: Vec<&str> = runs.iter().map(|r| r.to_str().unwrap()).collect();
    let first = harness(work, &[&["history", "import"], &dirs[..]].concat());
    assert_eq!(first.matches(": new").count(), runs.len(), "{first}");
    let again = harness(work, &[&["history", "import"], &dirs[..]].concat());
    assert_eq!(
        again.matches(": unchanged").count(),
        runs.len(),
        "re-import changes nothing: {again}"
    );
    between();
    let table = harness(work, &["history"]);
    assert!(table.contains("E-divisive means"), "{table}");
    let page = work.join("pages/history.html");
    std::fs::create_dir_all(page.parent().unwrap()).unwrap();
    harness(work, &["history", "--html", page.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_str(&harness(work, &["--json", "history"])).unwrap();
    let series = json.as_array().unwrap().len();
    (dom(&page, &work.join("profile")), series)
}

pub(super) fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A run directory of night `i`: base and v at 2 vCPUs, 5 boots × 2
/// repetitions, v 5% slower from night 14 on, a small wiggle every night.
pub(super) fn synthetic_night(runs: &Path, i: u64) -> PathBuf {
    let yaml = "variants:\n  - name: base\n  - name: v\nvcpus: [2]\nbenchmarks:\n  - {name: d, kind: doexec}\nsampling: {boots: 5, repetitions: 2}\nkey_metrics: [d]\n";
    let id = format!("night{i:02}");
    let meta = RunMeta {
        uid: None,
        wall_lock: None,
        format_version: harness::records::FORMAT_VERSION,
        id: id.clone(),
        started: harness::util::rfc3339(1_767_225_600 + i * 86_400),
        matrix: harness::config::parse(yaml, Path::new("/nonexistent/nightly.yaml"), None).unwrap(),
        host: Host {
            hostname: "testhost".into(),
            cpus: 2,
            ..Host::default()
        },
        harness_revision: None,
        clock: Some(MeasureClock::TcgIcount),
        inputs: None,
        jobs: None,
    };
    let wiggle = [0.0, 0.004, -0.003, 0.002, -0.005, 0.003, -0.001][(i % 7) as usize];
    let (mut samples, mut events) = (Vec::new(), Vec::new());
    for (variant, level) in [("base", 100.0), ("v", if i >= 14 { 95.0 } else { 100.0 })] {
        for boot in 0..5u32 {
            let boot_id = format!("{variant}-2cpu-b{boot}");
            events.push(serde_json::json!({"event": "boot", "variant": variant, "vcpus": 2, "boot": boot, "boot_id": boot_id,
                "accel": Accel::Tcg, "clock": MeasureClock::TcgIcount, "cmdline": "", "image": "vmlinux", "overcommit": 1.0,
                "ready_s": 1.0, "env": null, "error": null, "findings": []}));
            for rep in 0..2u32 {
                let value = level * (1.0 + wiggle) * (1.0 + 0.002 * (boot + rep) as f64);
                samples.push(Sample {
                    variant: variant.into(),
                    vcpus: 2,
                    benchmark: "d".into(),
                    params: serde_json::json!({}),
                    metric: "execs_per_s".into(),
                    unit: "execs/s".into(),
                    higher_is_better: true,
                    boot_id: boot_id.clone(),
                    boot,
                    repetition: rep,
                    warmup: false,
                    value,
                    series: vec![],
                    cpu: None,
                    clock: Some(MeasureClock::TcgIcount),
                    timestamp: meta.started.clone(),
                });
            }
            events.push(
                serde_json::to_value(Event::BootEnd {
                    variant: variant.into(),
                    vcpus: 2,
                    boot,
                    boot_id: Some(boot_id),
                    findings: vec![],
                    error: None,
                    busy_wall_per_guest_s: None,
                    failed: None,
                })
                .unwrap(),
            );
        }
    }
    let dir = runs.join(&id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    let lines = |v: Vec<String>| v.into_iter().map(|l| l + "\n").collect::<String>();
    std::fs::write(
        dir.join("samples.jsonl"),
        lines(samples.iter().map(|s| serde_json::to_string(s).unwrap()).collect()),
    )
    .unwrap();
    std::fs::write(
        dir.join("events.jsonl"),
        lines(events.iter().map(|e| e.to_string()).collect()),
    )
    .unwrap();
    dir
}

#[test]
fn history_page_of_24_nights_renders_in_a_browser_with_the_change_marked() {
    let work = scratch("history-synthetic");
    let runs: Vec<PathBuf> = (0..24).map(|i| synthetic_night(&work.join("runs"), i)).collect();
    // the last night's report, written with the history in place, says where its key cells stand
    let last = runs[23].to_str().unwrap();
    let (dom, series) = import_and_open(&work, &runs, || {
        let report = harness(&work, &["report", last]);
        assert!(report.contains("history: same as history (24 nights)"), "{report}");
        assert!(
            report.contains("history: changed on 2026-01-15 by -5.0% (worse)"),
            "{report}"
        );
    });
    assert_eq!(series, 2, "base and v");
    assert!(
        dom.contains(r#"data-rendered-plots="2""#),
        "trends not rendered: {}",
        &dom[..dom.len().min(600)]
    );
    assert_eq!(dom.matches(r#"class="change""#).count(), 1, "v's step, marked once");
    assert!(
        dom.contains("between night13 and night14"),
        "the runs on either side of the change"
    );
    assert!(
        dom.contains(r#"href="../runs/night23/report.html""#) && dom.contains(r#"href="../runs/night00""#),
        "points link to their runs"
    );
}

/// Real run directories: `$HARNESS_HISTORY_RUNS` or `tests/fixtures/history-runs/`.
fn real_runs() -> Vec<PathBuf> {
    let root = std::env::var_os("HARNESS_HISTORY_RUNS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history-runs"));
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.join("run.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    runs.sort();
    runs
}

#[test]
fn real_runs_history_page_renders_in_a_browser() {
    let runs = real_runs();
    assert!(runs.len() >= 5, "found {} real run directories; copy at least five runs' run.json, samples.jsonl and events.jsonl into tests/fixtures/history-runs/<run id>/", runs.len());
    let work = scratch("history-real");
    // copies, so importing never touches the fixtures
    let copies: Vec<PathBuf> = runs
        .iter()
        .map(|r| {
            let to = work.join("runs").join(r.file_name().unwrap());
            std::fs::create_dir_all(&to).unwrap();
            for f in ["run.json", "samples.jsonl", "events.jsonl"] {
                if r.join(f).is_file() {
                    std::fs::copy(r.join(f), to.join(f)).unwrap();
                }
            }
            to
        })
        .collect();
    let (dom, series) = import_and_open(&work, &copies, || {});
    assert!(series > 0);
    assert!(
        dom.contains(&format!(r#"data-rendered-plots="{series}""#)),
        "every trend laid out: {}",
        &dom[..dom.len().min(600)]
    );
    let json: serde_json::Value = serde_json::from_str(&harness(&work, &["--json", "history"])).unwrap();
    let longest = json
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["nights"].as_array().unwrap().len())
        .max()
        .unwrap();
    assert!(
        longest >= 5,
        "the runs form one series of at least five nights (same matrix, profile, host and clock); longest: {longest}"
    );
}

/// `report --junit`: night 20's regressed cell is a JUnit failure; a path
/// that cannot be written is an error naming it, after the report files.
#[test]
fn report_writes_junit_and_an_unwritable_path_is_an_error_after_the_report_files() {
    let work = scratch("report-junit");
    let night = synthetic_night(&work.join("runs"), 20);
    let xml_path = work.join("junit.xml");
    harness(
        &work,
        &["report", night.to_str().unwrap(), "--junit", xml_path.to_str().unwrap()],
    );
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="harness night20" id="night20""#) && xml.contains(r#"tests="1" failures="1""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<testcase classname="d.execs_per_s" name="v at 2 vCPUs">"#)
            && xml.contains("<failure message=\"v execs_per_s at 2 vCPUs (d): worse by"),
        "{xml}"
    );
    std::fs::remove_file(night.join("report.json")).unwrap();
    let bad = work.join("no-such-dir").join("junit.xml");
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_WORK_DIR", &work)
        .env("HARNESS_HISTORY_DB", work.join("history.sqlite"))
        .args(["report", night.to_str().unwrap(), "--junit", bad.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(&format!("write the junit report {}", bad.display())),
        "{stderr}"
    );
    assert!(night.join("report.json").exists(), "the report files are written first");
}
