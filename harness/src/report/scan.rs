//! What a run's events say about its variants, boots and failures, read
//! once for the whole report.

use std::collections::{BTreeMap, BTreeSet};

use super::{BootRow, BuildRow, CellFailure};
use crate::plan::{CellKey, JobId};
use crate::records::Event;

/// What the events say about boots and failures.
#[derive(Default)]
pub(super) struct Scan {
    /// A variant's failed patch, config or build step.
    pub(super) variant_fail: BTreeMap<String, CellFailure>,
    /// A cell's failed benchmark: (cell, benchmark) → the failure.
    pub(super) cell_fail: BTreeMap<(CellKey, String), CellFailure>,
    /// A cell's failed boot.
    pub(super) boot_fail: BTreeMap<CellKey, CellFailure>,
    /// boot id → cell of every boot that ended.
    pub(super) ended: BTreeMap<String, CellKey>,
    /// Jobs given up on before a boot: each counts as an ended, failed boot.
    pub(super) not_booted: BTreeSet<JobId>,
    /// (boot id, benchmark) with a failed repetition.
    pub(super) bench_failed: BTreeSet<(String, String)>,
    pub(super) notes: Vec<String>,
    pub(super) boots: Vec<BootRow>,
    pub(super) series: Vec<(String, String)>,
    pub(super) builds: Vec<BuildRow>,
    pub(super) jobs_ended: usize,
    /// (variant, vCPUs) → boot ids with a kernel fault: a panic, oops, BUG or
    /// hung task on the console, or a boot cut by a panic, a hang or no SSH.
    pub(super) faulted: BTreeMap<(String, u32), BTreeSet<String>>,
    /// (boot id, benchmark) whose benchmark timed out or whose guest hung.
    pub(super) timed_out: BTreeSet<(String, String)>,
}

/// A console finding that is the kernel's fault whatever the host's load
/// (soft lockups and RCU stalls are not: overcommitted vCPUs raise them).
fn is_fault(f: &crate::records::Finding) -> bool {
    use crate::records::Trouble;
    matches!(
        f.kind,
        Trouble::Panic | Trouble::Oops | Trouble::Bug | Trouble::HungTask
    )
}

/// A recorded cause that is the kernel's fault.
fn faulting(e: &Event) -> bool {
    use crate::records::Cause;
    e.failed()
        .is_some_and(|f| matches!(f.cause, Cause::Panic | Cause::GuestHung | Cause::BootTimeout))
}

/// Notes a boot's kernel fault, if `e` shows one.
fn note_fault(s: &mut Scan, e: &Event) {
    let (variant, vcpus, id, findings) = match e {
        Event::Boot {
            variant,
            vcpus,
            boot_id,
            findings,
            retried: false,
            ..
        } => (variant, vcpus, Some(boot_id), findings),
        Event::BootEnd {
            variant,
            vcpus,
            boot_id,
            findings,
            ..
        } => (variant, vcpus, boot_id.as_ref(), findings),
        Event::BenchFailed {
            variant,
            vcpus,
            boot_id,
            ..
        } => (variant, vcpus, Some(boot_id), &Vec::new()),
        _ => return,
    };
    if let Some(id) = id.filter(|_| faulting(e) || findings.iter().any(is_fault)) {
        s.faulted
            .entry((variant.clone(), *vcpus))
            .or_default()
            .insert(id.clone());
    }
}

fn boot_row(e: &Event) -> Option<BootRow> {
    let Event::Boot {
        variant,
        vcpus,
        boot_id,
        accel,
        ready_s,
        env,
        error,
        findings,
        overcommit,
        image,
        retried,
        ..
    } = e
    else {
        return None;
    };
    Some(BootRow {
        boot_id: boot_id.clone(),
        variant: variant.clone(),
        vcpus: *vcpus,
        accel: *accel,
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
        error: error.as_ref().map(|e| {
            if *retried {
                format!("{e} (started again)")
            } else {
                e.clone()
            }
        }),
    })
}

/// Reads every event of a run, in order.
pub(super) fn scan(events: &[Event]) -> Scan {
    let mut s = Scan::default();
    for e in events {
        note_fault(&mut s, e);
        match e {
            // a step's outcome replaces the variant's earlier failure: a
            // `--resume` that patched, configured and built it repaired it
            Event::Patch { variant, error, .. } => variant_step(&mut s, variant, error, e),
            Event::Config {
                variant, lost, error, ..
            } => {
                variant_step(&mut s, variant, error, e);
                if !lost.is_empty() {
                    let l: Vec<String> = lost.iter().map(|x| x.to_string()).collect();
                    s.notes
                        .push(format!("{variant}: config symbols not kept: {}", l.join(", ")));
                }
            }
            Event::Build {
                variant,
                build_s,
                cached,
                error,
                ..
            } => {
                variant_step(&mut s, variant, error, e);
                s.builds.push(BuildRow {
                    variant: variant.clone(),
                    build_s: *build_s,
                    cached: *cached,
                    error: error.clone(),
                    failed: e.failed(),
                });
            }
            Event::Series { series, state } => s.series.push((series.clone(), state.to_string())),
            Event::Boot { .. } => scan_boot(&mut s, e),
            Event::BenchFailed { .. } => scan_bench_failed(&mut s, e),
            Event::BootEnd { .. } => scan_boot_end(&mut s, e),
            Event::Notice { message } => s.notes.push(message.clone()),
            // read by the differential profile (report::profiles)
            Event::Profile { .. } => {}
        }
    }
    s
}

/// A boot's start: a failure before SSH is its cell's (a QEMU crash
/// started again only a note), and the boot's row.
fn scan_boot(s: &mut Scan, e: &Event) {
    let Event::Boot {
        variant,
        vcpus,
        error,
        retried,
        boot_id,
        ..
    } = e
    else {
        return;
    };
    match error {
        // QEMU's crash, started again: shown, never the kernel's failure
        Some(err) if *retried => s
            .notes
            .push(format!("{boot_id}: {err}; QEMU's failure, the boot was started again")),
        Some(err) => {
            _ = s
                .boot_fail
                .insert(CellKey::new(variant, *vcpus), CellFailure::of(err, e))
        }
        None => {}
    }
    s.boots.extend(boot_row(e));
}

/// A failed repetition: its cell's failure, its boot's failed benchmark
/// (timed out when it hung), a note.
fn scan_bench_failed(s: &mut Scan, e: &Event) {
    let Event::BenchFailed {
        variant,
        vcpus,
        benchmark,
        repetition,
        error,
        boot_id,
        failed,
    } = e
    else {
        return;
    };
    use crate::records::Cause;
    if failed.is_some_and(|f| matches!(f.cause, Cause::BenchTimeout | Cause::GuestHung)) {
        s.timed_out.insert((boot_id.clone(), benchmark.clone()));
    }
    s.cell_fail.insert(
        (CellKey::new(variant, *vcpus), benchmark.clone()),
        CellFailure::of(error, e),
    );
    s.bench_failed.insert((boot_id.clone(), benchmark.clone()));
    s.notes.push(format!("{boot_id} {benchmark} rep {repetition}: {error}"));
}

/// Records a patch, config or build outcome of `variant`: a failure, or a
/// success that clears the failure of an earlier attempt.
fn variant_step(s: &mut Scan, variant: &str, error: &Option<String>, e: &Event) {
    match error {
        Some(err) => s.variant_fail.insert(variant.to_string(), CellFailure::of(err, e)),
        None => s.variant_fail.remove(variant),
    };
}

fn scan_boot_end(s: &mut Scan, e: &Event) {
    let Event::BootEnd {
        boot_id,
        findings,
        error,
        variant,
        vcpus,
        boot,
        failed,
        ..
    } = e
    else {
        return;
    };
    s.jobs_ended += 1;
    if let Some(id) = boot_id {
        s.ended.insert(id.clone(), CellKey::new(variant, *vcpus));
    }
    if boot_id.is_none() && failed.is_some_and(|f| f.cause == crate::records::Cause::NotBooted) {
        // a job given up on counts as an ended boot without samples: a failed one
        s.not_booted.insert(JobId {
            variant: variant.clone(),
            vcpus: *vcpus,
            boot: *boot,
        });
    }
    if let Some(b) = boot_id
        .as_ref()
        .and_then(|id| s.boots.iter_mut().find(|b| &b.boot_id == id))
    {
        for f in findings {
            if !b.findings.contains(&f.signature) {
                b.findings.push(f.signature.clone());
            }
        }
    }
    if let Some(err) = error {
        s.boot_fail
            .entry(CellKey::new(variant, *vcpus))
            .or_insert_with(|| CellFailure::of(err, e));
    }
    for f in findings {
        s.notes.push(format!(
            "{}: console: {} — {}",
            boot_id.clone().unwrap_or_default(),
            f.signature,
            f.line
        ));
    }
}
