//! A wall-clock run's profile boots (`guest: {kernel_profile: true}` under
//! a wall clock): once the measured boots are done, one boot per variant
//! and vCPU count under TCG's instruction-counting clock with the profiler
//! plugin, the same kernels from the cache. They are a run of their own in
//! `<run>/profile-boots/`, so their icount samples never mix with the
//! wall-clock cells; the report takes the cells' kernel profiles from them
//! (the instruction profile is a property of the code path, not of the
//! accelerator that ran it).

use anyhow::Result;

use super::Options;
use crate::config::{AccelChoice, BenchKind, Clock, Matrix, Sampling};
use crate::plan;
use crate::records::RunMeta;
use crate::store::{Run, PROFILE_BOOTS_DIR};
use crate::ui::Ui;

/// The matrix of a run's profile boots: its variants, vCPU counts,
/// benchmarks and command line, one boot each under icount with the
/// profiler, one measured repetition of each benchmark, shortened to what a
/// count per operation needs (at most a guest second of doexec and
/// fork-exec, 50 fork-prlimit iterations, 1000 test_vmalloc loops).
pub fn matrix(m: &Matrix) -> Matrix {
    let mut p = m.clone();
    p.guest.accel = AccelChoice::Tcg;
    p.guest.clock = Clock::Icount;
    p.guest.kernel_profile = true;
    p.guest.profile_boots = false;
    p.sampling = Sampling {
        boots: 1,
        repetitions: 1,
        warmup_repetitions: 0,
        seed: m.sampling.seed,
    };
    p.statistics.second_stage_boots = 0;
    for b in &mut p.benchmarks {
        shorten(&mut b.kind);
    }
    p
}

/// One benchmark's parameters cut to a profile boot's length.
fn shorten(k: &mut BenchKind) {
    match k {
        BenchKind::Doexec {
            duration_s, warmup_s, ..
        }
        | BenchKind::ForkExec {
            duration_s, warmup_s, ..
        } => {
            *duration_s = (*duration_s).min(1);
            *warmup_s = 0;
        }
        BenchKind::ForkPrlimit { iterations, .. } => *iterations = (*iterations).min(50),
        BenchKind::TestVmalloc { test_loop_count, .. } => *test_loop_count = (*test_loop_count).min(1000),
        // a program's length is its arguments' (`{duration_s}` where it uses it)
        BenchKind::Program { duration_s, .. } => *duration_s = (*duration_s).min(1),
    }
}

/// Boots the profile boots of `run` (its `run.json` is `meta`) when its
/// matrix asks for them: only a wall-clock matrix does, so its measured
/// boots never carry profiles of their own. A resumed run goes on where its
/// profile boots stopped.
pub(super) fn boot(run: &Run, meta: &RunMeta, opts: &Options) -> Result<()> {
    if !meta.matrix.guest.profile_boots {
        return Ok(());
    }
    let pm = matrix(&meta.matrix);
    let dir = run.dir.join(PROFILE_BOOTS_DIR);
    let fresh = !dir.join("run.json").is_file();
    let mut sub = if fresh {
        Run::create_at(&dir)?
    } else {
        Run::open_to_write(&dir)?
    };
    // its own id: the private keys and images live under it in the work directory
    sub.id = format!("{}.{PROFILE_BOOTS_DIR}", run.id);
    if fresh {
        let started = crate::util::now_rfc3339();
        sub.write_meta(&RunMeta {
            id: sub.id.clone(),
            started,
            matrix: pm.clone(),
            clock: None,
            jobs: None,
            uid: Some(crate::records::new_uid()),
            ..meta.clone()
        })?;
    }
    let ui = Ui::new(0, opts.quiet);
    let jobs = plan::boot_jobs(&pm);
    let msg = format!(
        "profile boots: {} boot(s), one per variant and vCPU count, under TCG's instruction-counting clock with the profiler ({})",
        jobs.len(),
        dir.display()
    );
    run.notice(&ui, msg)?;
    let sub_opts = Options {
        jobs: None,
        ..opts.clone()
    };
    super::execute_fixed(&sub, &pm, &sub_opts, &jobs, Some(&run.events()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Count;

    #[test]
    fn profile_boots_count_under_icount_once_per_arm_and_briefly() {
        let yaml = "variants: [{name: base}, {name: v}]\n\
            guest: {kernel_profile: true, memory_mib: 4096, cmdline: [foo=1]}\n\
            vcpus: [2, 26]\n\
            benchmarks:\n\
            \x20 - {name: d, kind: doexec, duration_s: 10, warmup_s: 2}\n\
            \x20 - {name: p, kind: fork_prlimit, iterations: 5000}\n\
            \x20 - {name: t, kind: test_vmalloc, test_loop_count: 10}\n\
            sampling: {boots: 7, repetitions: 3, warmup_repetitions: 1}\n";
        let m = crate::config::parse(yaml, std::path::Path::new("/m/matrix.yaml"), None).unwrap();
        assert!(
            m.guest.profile_boots && !m.guest.kernel_profile,
            "a wall-clock matrix asks for profile boots"
        );
        let p = matrix(&m);
        assert_eq!(
            (
                p.guest.accel,
                p.guest.clock,
                p.guest.kernel_profile,
                p.guest.profile_boots
            ),
            (AccelChoice::Tcg, Clock::Icount, true, false)
        );
        assert_eq!(
            (p.sampling.boots, p.sampling.repetitions, p.sampling.warmup_repetitions),
            (1, 1, 0)
        );
        assert_eq!(
            (p.vcpus.clone(), p.guest.cmdline.clone(), p.guest.memory_mib),
            (vec![2, 26], vec!["foo=1".to_string()], 4096)
        );
        let kinds: Vec<&BenchKind> = p.benchmarks.iter().map(|b| &b.kind).collect();
        assert!(
            matches!(
                kinds[0],
                BenchKind::Doexec {
                    duration_s: 1,
                    warmup_s: 0,
                    workers: Count::Named(_),
                    ..
                }
            ),
            "{:?}",
            kinds[0]
        );
        assert!(
            matches!(kinds[1], BenchKind::ForkPrlimit { iterations: 50, .. }),
            "{:?}",
            kinds[1]
        );
        assert!(
            matches!(
                kinds[2],
                BenchKind::TestVmalloc {
                    test_loop_count: 10,
                    ..
                }
            ),
            "a short test stays as it is: {:?}",
            kinds[2]
        );
        assert_eq!(plan::boot_jobs(&p).len(), 4, "one boot per variant and vCPU count");
    }
}
