//! The accelerator and the clock of a run: TCG when the matrix or its clock
//! asks for it, when /dev/kvm does not open, or when a probe boot on this
//! host and QEMU failed before; otherwise KVM, proved by one short probe
//! boot before any job. The clock the numbers are in goes to `run.json`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::Kernels;
use crate::boot::{self, BootRun, ProbeFailure};
use crate::config::{self, AccelChoice, Clock, InsteadOf, Matrix};
use crate::host;
use crate::kernel::build::Artifact;
use crate::records::Cause;
use crate::records::MeasureClock;
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::{self, Accel};
use crate::workdir::WorkDir;

/// Why KVM is not usable on this host, or None when it runs guest code:
/// /dev/kvm does not open, a probe failed on this host and QEMU before, or
/// a firmware-only KVM guest fails at once ([`vm::probe_kvm_firmware`],
/// whose failure is then remembered like a failed probe boot).
pub fn kvm_unusable(work: &WorkDir) -> Result<Option<String>> {
    if let Some(why) = vm::kvm_precheck() {
        return Ok(Some(why));
    }
    let qemu = host::qemu_binary()?;
    let key = host::probe_key(&qemu);
    if let Some(why) = remembered_failure(work, &key) {
        return Ok(Some(why));
    }
    work.create()?;
    let why = vm::probe_kvm_firmware(&qemu, &work.log("kvm-firmware-probe"))?;
    if let Some(w) = &why {
        host::remember_failed_probe(work, &key, w)?;
    }
    Ok(why)
}

/// A probe that failed on this host and QEMU before, and how to probe again.
fn remembered_failure(work: &WorkDir, probe_key: &str) -> Option<String> {
    let f = host::failed_probe(work, probe_key)?;
    Some(format!(
        "a probe boot failed on {}: {}; delete {} to probe again",
        f.when,
        f.reason,
        host::probe_path(work, probe_key).display()
    ))
}

/// `m` as it runs on this host: where its profile has a `without_kvm:` and
/// KVM is not usable (or the matrix asks for TCG), that profile instead,
/// loaded from the same matrix file and marked with what it replaces.
pub fn for_this_host(m: Matrix, work: &WorkDir) -> Result<Matrix> {
    let (Some(alt), Some(asked)) = (m.without_kvm.clone(), m.profile.clone()) else {
        return Ok(m);
    };
    let why = match (m.guest.accel, m.guest.clock) {
        (AccelChoice::Kvm, _) | (_, Clock::Icount) => return Ok(m),
        (AccelChoice::Tcg, Clock::Wall) => "the matrix asks for TCG".to_string(),
        (AccelChoice::Auto, Clock::Wall) => match kvm_unusable(work)? {
            Some(why) => why,
            None => return Ok(m),
        },
    };
    let mut instead = config::load(&m.path, Some(&alt))
        .with_context(|| format!("load profile `{alt}` (profiles.{asked}.without_kvm)"))?;
    instead.instead_of = Some(InsteadOf { profile: asked, why });
    Ok(instead)
}

/// The line a run prints and records when its profile replaced the one
/// asked for.
fn instead_notice(m: &Matrix) -> Option<String> {
    let i = m.instead_of.as_ref()?;
    let clock = match m.guest.clock {
        Clock::Icount => {
            "under the instruction-counting clock, which resolves the changes TCG's wall clock cannot (docs/clocks.md)"
        }
        Clock::Wall => "under the wall clock",
    };
    Some(format!(
        "KVM is not usable here ({}): profile `{}` runs as `{}` (profiles.{}.without_kvm), {clock}",
        i.why,
        i.profile,
        m.profile.as_deref().unwrap_or("?"),
        i.profile
    ))
}

/// How a run gets its accelerator, decided from the matrix and the host
/// before the run directory exists: TCG when the matrix or its clock asks
/// for it, when /dev/kvm does not open, or when a probe on this host and
/// QEMU failed before; otherwise KVM, which the probe boot must prove.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The accelerator the boots start with.
    pub accel: Accel,
    /// KVM is to be proved by the probe boot before any job.
    pub probe: bool,
    /// After a probe boot QEMU blamed on KVM, the run ends to be started
    /// again as this profile (`without_kvm:`), where the caller can.
    pub restart_as: Option<String>,
    /// [`host::probe_key`] of this host's QEMU.
    pub probe_key: String,
    /// What the run records and shows at its start, in order.
    notices: Vec<String>,
}

impl Plan {
    /// The plan of a run of `m` on this host; `restart`: a fresh run whose
    /// caller starts the `without_kvm:` substitute after a failed probe
    /// (else the run goes on under TCG).
    pub fn new(m: &Matrix, work: &WorkDir, restart: bool) -> Result<Plan> {
        let probe_key = host::probe_key(&host::qemu_binary()?);
        let mut notices: Vec<String> = instead_notice(m).into_iter().collect();
        let why = match (m.guest.accel, m.guest.clock) {
            (AccelChoice::Tcg, _) | (AccelChoice::Auto, Clock::Icount) => None,
            (AccelChoice::Kvm, _) => return Ok(Plan::kvm(m, restart, probe_key, notices)),
            (AccelChoice::Auto, Clock::Wall) => match (vm::kvm_precheck(), remembered_failure(work, &probe_key)) {
                (Some(why), _) => Some(why),
                (None, Some(failed)) => Some(format!("KVM is not usable here ({failed})")),
                (None, None) => return Ok(Plan::kvm(m, restart, probe_key, notices)),
            },
        };
        notices.extend(why.map(|w| format!("{w}; using TCG (-accel tcg,thread=multi)")));
        Ok(Plan {
            accel: Accel::Tcg,
            probe: false,
            restart_as: None,
            probe_key,
            notices,
        })
    }

    /// KVM, probed first unless the matrix asks for KVM itself.
    fn kvm(m: &Matrix, restart: bool, probe_key: String, notices: Vec<String>) -> Plan {
        let probe = m.guest.accel == AccelChoice::Auto;
        Plan {
            accel: Accel::Kvm,
            probe,
            restart_as: m.without_kvm.clone().filter(|_| probe && restart),
            probe_key,
            notices,
        }
    }

    /// Records and shows the plan's notices (at the run's start).
    pub(super) fn tell(&self, run: &Run, ui: &Ui) -> Result<()> {
        for n in &self.notices {
            run.notice(ui, n.clone())?;
        }
        Ok(())
    }
}

/// The kernel the probe boots: `base`'s when it built, else the first that built.
fn probe_kernel(kernels: &Kernels) -> Option<&(Artifact, PathBuf)> {
    kernels
        .get("base")
        .and_then(|k| k.as_ref().ok())
        .or_else(|| kernels.values().find_map(|k| k.as_ref().ok()))
}

/// What a probe boot's outcome means for the run.
#[derive(Debug, PartialEq)]
enum AfterProbe {
    /// KVM works, or the probe says nothing against it.
    Kvm,
    /// The probe's kernel failed by itself (a panic): KVM is not blamed,
    /// the jobs boot under KVM and record the kernel's failures.
    KernelFault(String),
    /// KVM does not work here: TCG, and remember it when QEMU blamed KVM.
    Tcg {
        /// Why.
        why: String,
        /// QEMU blamed KVM: remember it for this host.
        remember: bool,
    },
}

/// The load average per CPU from which a host counts as heavily loaded: a
/// probe that times out then may be the host's slowness, not KVM's.
const HEAVY_LOAD_PER_CPU: f64 = 1.0;

/// Whether a probe failure is a timeout beside a heavy host load
/// (`load_per_cpu`, the 1-minute load average per CPU): it is probed once
/// more, and never remembered for the host.
fn timed_out_loaded(f: &ProbeFailure, load_per_cpu: Option<f64>) -> bool {
    f.cause == Cause::BootTimeout && load_per_cpu.is_some_and(|l| l >= HEAVY_LOAD_PER_CPU)
}

/// What a probe's failure `f` means, the host's load per CPU then being
/// `load_per_cpu`.
fn after_probe(f: Option<ProbeFailure>, load_per_cpu: Option<f64>) -> AfterProbe {
    match f {
        None => AfterProbe::Kvm,
        Some(f) if !f.kvm_fault && f.cause == Cause::Panic => AfterProbe::KernelFault(f.why),
        Some(f) => AfterProbe::Tcg {
            remember: f.kvm_fault && !timed_out_loaded(&f, load_per_cpu),
            why: f.why,
        },
    }
}

/// What the probe stage decided.
#[derive(Debug, PartialEq)]
pub(super) enum Probed {
    /// The boots run under this accelerator.
    Accel(Accel),
    /// KVM is not usable and the plan restarts as its substitute.
    RestartAs(Restart),
}

/// The probe boot, and once more when it timed out beside a heavy host
/// load; gives the last outcome and the load then.
fn probe_twice_if_loaded(ctx: &BootRun, kernel: &Path, initrd: &Path) -> Result<(Option<ProbeFailure>, Option<f64>)> {
    // it loads the host: never beside another run's wall-clock boot
    let _wall = super::wall_lock_unmeasured(ctx)?;
    let first = boot::probe_kvm(ctx, kernel, initrd, &ctx.run.log("kvm-probe"))?;
    let load = host::load_per_cpu();
    match &first {
        Some(f) if timed_out_loaded(f, load) => {
            let l = load.unwrap_or_default();
            ctx.run.notice(
                ctx.ui,
                format!("the KVM probe timed out with the host loaded ({l:.1} per CPU): probing once more"),
            )?;
            let again = boot::probe_kvm(ctx, kernel, initrd, &ctx.run.log("kvm-probe.2"))?;
            Ok((again, host::load_per_cpu()))
        }
        _ => Ok((first, load)),
    }
}

/// The KVM probe stage: one short 1-vCPU boot of `base`'s kernel (else the
/// first that built). A failure QEMU blames on KVM is remembered for this
/// host, host kernel and QEMU version (then, where the plan says so, the
/// run ends to start again as its substitute); a kernel's own failure (a
/// panic) leaves the run on KVM; any other failure only sends this run to
/// TCG.
pub(super) fn probe_stage(ctx: &BootRun, kernels: &Kernels, work: &WorkDir, plan: &Plan) -> Result<Probed> {
    let Some((art, initrd)) = probe_kernel(kernels) else {
        return Ok(Probed::Accel(Accel::Kvm));
    };
    ctx.ui
        .stage("probe", "booting once under KVM to see whether it works here");
    let kernel = art.boot_image(ctx.m.guest.pvh);
    let (outcome, load) = probe_twice_if_loaded(ctx, kernel, initrd)?;
    match after_probe(outcome, load) {
        AfterProbe::Kvm => Ok(Probed::Accel(Accel::Kvm)),
        AfterProbe::KernelFault(why) => {
            ctx.run.notice(
                ctx.ui,
                format!("the KVM probe's kernel failed by itself ({why}); KVM is not blamed, the boots run under KVM"),
            )?;
            Ok(Probed::Accel(Accel::Kvm))
        }
        AfterProbe::Tcg { why, remember } => {
            if remember {
                host::remember_failed_probe(work, &plan.probe_key, &why)?;
                // remembered, so the run started again takes the substitute profile
                if let Some(instead) = &plan.restart_as {
                    let instead = instead.clone();
                    return Ok(Probed::RestartAs(Restart { instead, why }));
                }
            }
            ctx.run.notice(
                ctx.ui,
                format!(
                    "KVM is not usable here (probe boot failed: {why}); falling back to TCG (-accel tcg,thread=multi)"
                ),
            )?;
            Ok(Probed::Accel(Accel::Tcg))
        }
    }
}

/// Why a fresh run (the probe stage comes before any boot; a resume keeps
/// its matrix and never restarts) ends to be started again: its probe boot
/// found KVM unusable, and its profile names what to run where KVM is not
/// usable (the firmware-only probe of [`for_this_host`] can pass where a
/// kernel's boot then fails, as "KVM internal error. Suberror: 1" does on
/// nested hosts). The failure is remembered, so the run started again gets
/// the substitute profile instead of a wall-clock run under TCG.
#[derive(Debug, Clone, PartialEq)]
pub struct Restart {
    /// The profile to run instead.
    pub instead: String,
    /// Why KVM is not usable.
    pub why: String,
}

impl std::fmt::Display for Restart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the KVM probe boot failed ({}): this profile runs as `{}` where KVM is not usable",
            self.why, self.instead
        )
    }
}

/// Writes the clock the run's numbers are in to `run.json`.
pub(super) fn record_clock(run: &Run, clock: MeasureClock) -> Result<()> {
    if let Some(me) = run.shard {
        // run.json is the build's; each boot record carries its clock, and
        // a shard boots only in the clock the others measured in
        return same_clock_as_the_shards(run, me, clock);
    }
    let mut meta = run.meta()?;
    if let Some(had) = meta.clock.filter(|&c| c != clock) {
        bail!(
            "resume {}: its numbers are in the {had} clock but this host would measure in {clock}; \
             resume it where {had} is available (numbers of different clocks are never mixed)",
            run.dir.display()
        );
    }
    if meta.clock != Some(clock) {
        meta.clock = Some(clock);
        run.write_meta(&meta)?;
    }
    Ok(())
}

/// Reads the host's state, its IRQs counted on the CPUs the largest guest
/// is pinned to, into `run.json`'s `host.state` (a shard's run.json is the
/// build's: it is left alone); under a wall clock each finding that costs
/// the numbers something is a notice with its fix.
pub(super) fn record_host_state(ctx: &BootRun) -> Result<()> {
    let (m, clock) = (ctx.m, ctx.clock());
    let guest_clock = if clock == MeasureClock::TcgIcount {
        Clock::Icount
    } else {
        Clock::Wall
    };
    let measured = vm::pin::measured_cpus(ctx.accel, guest_clock, &m.guest, &m.vcpus);
    let state = host::state::HostState::here(&measured);
    if clock != MeasureClock::TcgIcount {
        let need = m.guest.hugepages.then_some(m.guest.memory_mib);
        for f in host::state::findings(&state, ctx.host_cpus as usize, need) {
            if let (true, Some(fix)) = (f.warn, f.fix) {
                ctx.run
                    .notice(ctx.ui, format!("host {}: {}; fix: {fix}", f.what, f.message))?;
            }
        }
    }
    if ctx.accel == Accel::Kvm {
        if let Some(n) = host::state::nested_kvm_notice(&state) {
            ctx.run.notice(ctx.ui, n)?;
        }
    }
    if ctx.run.shard.is_none() {
        let mut meta = ctx.run.meta()?;
        meta.host.state = Some(state);
        ctx.run.write_meta(&meta)?;
    }
    Ok(())
}

/// Refuses shard `me` when a shard of the run (itself on another host
/// included) has boots in another clock than `clock`.
fn same_clock_as_the_shards(run: &Run, me: crate::plan::Shard, clock: MeasureClock) -> Result<()> {
    for s in Run::open(&run.dir)?.shard_dirs()? {
        let other = s.run.own_events()?.into_iter().find_map(|e| match e {
            crate::records::Event::Boot { clock: Some(c), .. } if c != clock => Some(c),
            _ => None,
        });
        if let Some(c) = other {
            bail!(
                "shard {me} of {}: this host would measure in the {clock} clock but shard {} measured in {c}; run it on a host where {c} is available (numbers of different clocks are never mixed)",
                run.dir.display(),
                s.shard
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(name: &str) -> Result<(Artifact, PathBuf), String> {
        let dir = PathBuf::from(format!("/k/{name}"));
        let a = Artifact {
            key: name.into(),
            bzimage: dir.join("bzImage"),
            vmlinux: dir.join("vmlinux"),
            modules: None,
            release: "6.12.0".into(),
            build_s: 0.0,
            nr_cpus: None,
            dir,
        };
        Ok((a, PathBuf::from(format!("/k/{name}.initrd"))))
    }

    /// A matrix file whose `quick` runs as `exact` without KVM, `accel` as given.
    fn two_profiles(dir: &Path, accel: &str) -> PathBuf {
        let text = format!(
            "guest: {{accel: {accel}}}\nvariants: [{{name: base}}]\nvcpus: [4]\nbenchmarks: [{{name: s, kind: doexec}}]\n\
             profiles:\n  quick: {{without_kvm: exact}}\n  exact: {{clock: icount, vcpus: [2]}}\n"
        );
        let path = dir.join("matrix.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_profile_runs_as_its_without_kvm_profile_where_kvm_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        let wd = WorkDir::at(&work);
        // no probe runs in any of these: the matrix decides
        let cases = [
            ("tcg", "quick", Some(("exact", "the matrix asks for TCG"))),
            ("kvm", "quick", None),
            ("tcg", "exact", None),
        ];
        for (accel, profile, want) in cases {
            let path = two_profiles(tmp.path(), accel);
            let m = for_this_host(config::load(&path, Some(profile)).unwrap(), &wd).unwrap();
            let got = m
                .instead_of
                .as_ref()
                .map(|i| (m.profile.as_deref().unwrap(), i.why.as_str()));
            assert_eq!(got, want, "accel {accel}, profile {profile}");
            if want.is_some() {
                assert_eq!(
                    (
                        m.vcpus.clone(),
                        m.guest.clock,
                        m.instead_of.as_ref().unwrap().profile.as_str()
                    ),
                    (vec![2], Clock::Icount, "quick")
                );
                let n = instead_notice(&m).unwrap();
                assert!(n.starts_with("KVM is not usable here (the matrix asks for TCG): profile `quick` runs as `exact` (profiles.quick.without_kvm), under the instruction-counting clock"), "{n}");
            }
        }
        assert!(!work.exists(), "nothing probed, nothing written");
    }

    /// The plan is the matrix's and the host's: no probe where the matrix
    /// names the accelerator, TCG with the reason where a probe failed here
    /// before, a restart only for a caller that can and a profile with a
    /// substitute.
    #[test]
    fn the_plan_follows_the_matrix_and_what_the_host_remembers() {
        let tmp = tempfile::tempdir().unwrap();
        let work = WorkDir::at(&tmp.path().join("work"));
        let plan = |accel: &str, restart| {
            let m = config::load(&two_profiles(tmp.path(), accel), Some("quick")).unwrap();
            Plan::new(&m, &work, restart).unwrap()
        };
        let p = plan("tcg", true);
        assert_eq!(
            (p.accel, p.probe, p.restart_as, p.notices),
            (Accel::Tcg, false, None, vec![])
        );
        let p = plan("kvm", true);
        assert_eq!((p.accel, p.probe, p.restart_as), (Accel::Kvm, false, None));
        if vm::kvm_precheck().is_none() {
            let p = plan("auto", true);
            assert_eq!(
                (p.accel, p.probe, p.restart_as),
                (Accel::Kvm, true, Some("exact".into()))
            );
            assert_eq!(plan("auto", false).restart_as, None);
        }
        let key = host::probe_key(&host::qemu_binary().unwrap());
        host::remember_failed_probe(&work, &key, "KVM internal error").unwrap();
        let p = plan("auto", true);
        assert_eq!((p.accel, p.probe, p.restart_as), (Accel::Tcg, false, None));
        assert!(
            p.notices.len() == 1
                && p.notices[0].contains("a probe boot failed on")
                && p.notices[0].ends_with("; using TCG (-accel tcg,thread=multi)"),
            "{:?}",
            p.notices
        );
    }

    #[test]
    fn the_probe_boots_base() {
        let cases: [(&[&str], &[&str], Option<&str>); 4] = [
            (&["a-lockdep", "base", "z"], &[], Some("base")),
            (&["a-lockdep", "base"], &["base"], Some("a-lockdep")),
            (&["base"], &[], Some("base")),
            (&["a", "base"], &["a", "base"], None),
        ];
        for (names, broken, want) in cases {
            let k: Kernels = names
                .iter()
                .map(|n| {
                    (
                        n.to_string(),
                        if broken.contains(n) {
                            Err("not built".into())
                        } else {
                            built(n)
                        },
                    )
                })
                .collect();
            let got = probe_kernel(&k).map(|(_, i)| i.file_stem().unwrap().to_string_lossy().into_owned());
            assert_eq!(got.as_deref(), want, "{names:?} broken {broken:?}");
        }
    }

    #[test]
    fn a_kernel_that_panics_in_the_probe_does_not_send_the_run_to_tcg() {
        let f = |why: &str, kvm_fault, cause| {
            Some(ProbeFailure {
                why: why.into(),
                kvm_fault,
                cause,
            })
        };
        let cases = [
            (None, AfterProbe::Kvm),
            (
                f("KVM internal error", true, Cause::Qemu),
                AfterProbe::Tcg {
                    why: "KVM internal error".into(),
                    remember: true,
                },
            ),
            (
                f("kernel panic during boot (panic)", false, Cause::Panic),
                AfterProbe::KernelFault("kernel panic during boot (panic)".into()),
            ),
            (
                f("no SSH in 60 s", false, Cause::BootTimeout),
                AfterProbe::Tcg {
                    why: "no SSH in 60 s".into(),
                    remember: false,
                },
            ),
        ];
        for (probe, want) in cases {
            assert_eq!(after_probe(probe, Some(0.2)), want);
        }
    }

    /// Issue 30: a probe guest silent at the deadline beside a heavy host
    /// load (a `make -j`) is probed once more and, failing again, sends only
    /// this run to TCG: it is not remembered; on an idle host it is.
    #[test]
    fn a_probe_that_timed_out_beside_a_heavy_load_is_not_remembered() {
        let silent = || ProbeFailure {
            why: "no console output".into(),
            kvm_fault: true,
            cause: Cause::BootTimeout,
        };
        assert!(timed_out_loaded(&silent(), Some(1.5)));
        assert!(!timed_out_loaded(&silent(), Some(0.3)));
        assert!(!timed_out_loaded(&silent(), None));
        let internal = ProbeFailure {
            cause: Cause::Qemu,
            ..silent()
        };
        assert!(
            !timed_out_loaded(&internal, Some(3.0)),
            "a KVM internal error is KVM's, however loaded"
        );
        let tcg = |remember| AfterProbe::Tcg {
            why: "no console output".into(),
            remember,
        };
        assert_eq!(after_probe(Some(silent()), Some(2.0)), tcg(false));
        assert_eq!(after_probe(Some(silent()), Some(0.1)), tcg(true));
        assert_eq!(
            after_probe(Some(internal), Some(2.0)),
            AfterProbe::Tcg {
                why: "no console output".into(),
                remember: true
            }
        );
    }

    /// A shard on a host of another clock than a shard of the run already
    /// measured in is refused before it boots, naming both.
    #[test]
    fn a_shard_of_another_clock_is_refused() {
        use crate::plan::Shard;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("r");
        drop(Run::create_at(&dir).unwrap());
        std::fs::write(dir.join("run.json"), "{}").unwrap();
        let s0 = Run::open_shard(&dir, Shard { k: 0, n: 2 }).unwrap();
        let mut b = crate::report::tests::boot("base", "base-2cpu-b0", None);
        if let crate::records::Event::Boot { clock, .. } = &mut b {
            *clock = Some(MeasureClock::KvmWall);
        }
        s0.event(&b).unwrap();
        drop(s0);
        let s1 = Run::open_shard(&dir, Shard { k: 1, n: 2 }).unwrap();
        record_clock(&s1, MeasureClock::KvmWall).expect("the same clock goes on");
        let e = format!(
            "{:#}",
            record_clock(&s1, MeasureClock::TcgWall).expect_err("another clock")
        );
        assert!(
            e.contains("shard 1/2 of")
                && e.contains("this host would measure in the tcg-wall clock but shard 0/2 measured in kvm-wall"),
            "{e}"
        );
    }
}
