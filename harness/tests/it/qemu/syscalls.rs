//! Issue 34: the plugin's per-call syscall counts, with real QEMU under
//! icount at 2 vCPUs. QEMU 10.0 compiles the callback's vCPU index into a
//! translated block as the index of the vCPU that translated it whenever
//! blocks do not run in parallel, as under `-icount`, so a tracker keyed by
//! that index mixed the vCPUs' calls and dropped almost all of them in
//! some boots (base boot 1 of seed 003: 218 prlimit64 calls counted,
//! 587,624 dropped). The plugin now finds the executing vCPU by its
//! per-CPU base; this test fails on the old tracker.

use super::e2e::{events, harness, icount_matrix, jsonl, only_run_dir};
use crate::common::{build_profiler, run_ok, scratch};

/// The profile's `s NR CALLS INSNS DROPPED SWITCHED` line of syscall `nr`.
fn syscall_line(profile: &str, nr: u32) -> (u64, u64, u64, u64) {
    let line = profile
        .lines()
        .find(|l| l.starts_with(&format!("s {nr} ")))
        .unwrap_or_else(|| panic!("no syscall {nr} in the profile:\n{profile}"));
    let f: Vec<u64> = line.split(' ').skip(2).map(|x| x.parse().unwrap()).collect();
    (f[0], f[1], f[2], *f.get(3).unwrap_or(&f[2]))
}

#[test]
fn icount_counts_each_syscall_on_the_vcpu_that_made_it() {
    let _g = crate::common::serial();
    build_profiler();
    let dir = scratch("syscalls");
    let matrix = icount_matrix(
        &dir,
        "  - name: base\n",
        "",
        "{name: fork-prlimit, kind: fork_prlimit, fanout: 3, iterations: 20, timeout_s: 300}",
        "boots: 2, repetitions: 1, warmup_repetitions: 0",
        "",
    );
    let runs = dir.join("runs");
    let mut c = harness(&runs);
    c.arg("run").arg(&matrix);
    run_ok(c);
    let run = only_run_dir(&runs);

    let profiles = events(&run, "profile");
    assert_eq!(profiles.len(), 2, "{profiles:?}");
    for p in &profiles {
        let text = std::fs::read_to_string(run.join(p["path"].as_str().unwrap())).unwrap();
        // prlimit64 (302), getpriority (140), setpriority (141): the
        // spinners' calls, which never block, are counted, not dropped
        for nr in [302, 140, 141] {
            let (calls, insns, dropped, switched) = syscall_line(&text, nr);
            assert!(calls > 5_000, "syscall {nr}: {calls} calls counted, {dropped} dropped");
            assert!(
                dropped * 100 < calls,
                "syscall {nr}: {calls} calls counted, {dropped} dropped"
            );
            // a call is only ever left at a task switch, never by a second
            // entry on the same vCPU (which a mixed-up tracker sees)
            assert_eq!(dropped, switched, "syscall {nr}: dropped by a new entry");
            let per_call = insns as f64 / calls as f64;
            assert!(
                (50.0..5_000.0).contains(&per_call),
                "syscall {nr}: {per_call} insns/call"
            );
        }
        // a call that sleeps is dropped at its switch, never counted whole
        let (_, _, slept, _) = syscall_line(&text, 230);
        assert!(slept > 0, "clock_nanosleep dropped: {slept}");
    }
    let samples = jsonl(&run.join("samples.jsonl"));
    let per_call: Vec<f64> = samples
        .iter()
        .filter(|s| s["metric"] == "prlimit64_insns_per_call")
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(per_call.len(), 2, "one per boot: {per_call:?}");
    let spread = (per_call[0] - per_call[1]).abs() / per_call[0];
    assert!(spread < 0.05, "the boots agree within 5%: {per_call:?}");
}
