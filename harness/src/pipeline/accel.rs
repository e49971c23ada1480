//! The accelerator and the clock of a run: TCG when the matrix or its clock
//! asks for it, when /dev/kvm does not open, or when a probe boot on this
//! host and QEMU failed before; otherwise KVM, proved by one short probe
//! boot before any job. The clock the numbers are in goes to `run.json`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::Kernels;
use crate::boot::{self, BootCtx, ProbeFailure};
use crate::config::{self, AccelChoice, Clock, InsteadOf, Matrix};
use crate::host;
use crate::kernel::build::Artifact;
use crate::records::Cause;
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::{self, Accel, MeasureClock};

/// Why KVM is not usable on this host, or None when it runs guest code:
/// /dev/kvm does not open, a probe failed on this host and QEMU before, or
/// a firmware-only KVM guest fails at once ([`vm::probe_kvm_firmware`],
/// whose failure is then remembered like a failed probe boot).
pub fn kvm_unusable(work: &Path) -> Result<Option<String>> {
    if let Some(why) = vm::kvm_precheck() {
        return Ok(Some(why));
    }
    let qemu = host::qemu_binary()?;
    let key = host::probe_key(&qemu);
    if let Some(why) = remembered_failure(work, &key) {
        return Ok(Some(why));
    }
    std::fs::create_dir_all(work).with_context(|| format!("create {}", work.display()))?;
    let why = vm::probe_kvm_firmware(&qemu, &work.join("kvm-firmware-probe.log"))?;
    if let Some(w) = &why {
        host::remember_failed_probe(work, &key, w)?;
    }
    Ok(why)
}

/// A probe that failed on this host and QEMU before, and how to probe again.
fn remembered_failure(work: &Path, probe_key: &str) -> Option<String> {
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
pub fn for_this_host(m: Matrix, work: &Path) -> Result<Matrix> {
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

/// The accelerator before any boot: TCG when the matrix or its clock asks
/// for it, when /dev/kvm does not open, or when a probe on this host and
/// QEMU failed before; otherwise KVM, which the probe boot must prove.
pub(super) fn first_accel(m: &Matrix, run: &Run, ui: &Ui, work: &Path, probe_key: &str) -> Result<Accel> {
    if let Some(n) = instead_notice(m) {
        run.notice(ui, n)?;
    }
    let why = match (m.guest.accel, m.guest.clock) {
        (AccelChoice::Tcg, _) => return Ok(Accel::Tcg),
        (AccelChoice::Kvm, _) => return Ok(Accel::Kvm),
        (AccelChoice::Auto, Clock::Icount) => return Ok(Accel::Tcg),
        (AccelChoice::Auto, Clock::Wall) => match (vm::kvm_precheck(), remembered_failure(work, probe_key)) {
            (Some(why), _) => why,
            (None, Some(failed)) => format!("KVM is not usable here ({failed})"),
            (None, None) => return Ok(Accel::Kvm),
        },
    };
    run.notice(ui, format!("{why}; using TCG (-accel tcg,thread=multi)"))?;
    Ok(Accel::Tcg)
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

fn after_probe(f: Option<ProbeFailure>) -> AfterProbe {
    match f {
        None => AfterProbe::Kvm,
        Some(f) if !f.kvm_fault && f.cause == Cause::Panic => AfterProbe::KernelFault(f.why),
        Some(f) => AfterProbe::Tcg {
            why: f.why,
            remember: f.kvm_fault,
        },
    }
}

/// The KVM probe stage: one short 1-vCPU boot of `base`'s kernel (else the
/// first that built). A failure QEMU blames on KVM is remembered for this
/// host, host kernel and QEMU version; a kernel's own failure (a panic)
/// leaves the run on KVM; any other failure only sends this run to TCG.
pub(super) fn probe_stage(
    ctx: &BootCtx,
    kernels: &Kernels,
    work: &Path,
    probe_key: &str,
    restart_instead: bool,
) -> Result<Accel> {
    let Some((art, initrd)) = probe_kernel(kernels) else {
        return Ok(Accel::Kvm);
    };
    ctx.ui
        .stage("probe", "booting once under KVM to see whether it works here");
    let kernel = art.boot_image(ctx.m.guest.pvh);
    let dir = ctx.run.log("kvm-probe");
    match after_probe(boot::probe_kvm(ctx, kernel, initrd, &dir)?) {
        AfterProbe::Kvm => Ok(Accel::Kvm),
        AfterProbe::KernelFault(why) => {
            ctx.run.notice(
                ctx.ui,
                format!("the KVM probe's kernel failed by itself ({why}); KVM is not blamed, the boots run under KVM"),
            )?;
            Ok(Accel::Kvm)
        }
        AfterProbe::Tcg { why, remember } => {
            if remember {
                host::remember_failed_probe(work, probe_key, &why)?;
                // remembered, so the run started again takes the substitute profile
                if let (true, Some(instead)) = (restart_instead, &ctx.m.without_kvm) {
                    return Err(RunInstead {
                        instead: instead.clone(),
                        why,
                        dir: ctx.run.dir.clone(),
                    }
                    .into());
                }
            }
            ctx.run.notice(
                ctx.ui,
                format!(
                    "KVM is not usable here (probe boot failed: {why}); falling back to TCG (-accel tcg,thread=multi)"
                ),
            )?;
            Ok(Accel::Tcg)
        }
    }
}

/// A fresh run (the probe stage comes before any boot; a resume keeps its
/// matrix and does not ask for this) whose probe boot found KVM unusable,
/// from a profile that names what to run where KVM is not usable (the
/// firmware-only probe of [`for_this_host`] can pass where a kernel's boot
/// then fails, as "KVM internal error. Suberror: 1" does on nested hosts).
/// The failure is remembered, so the caller starts the run again and gets
/// the substitute profile instead of a wall-clock run under TCG.
#[derive(Debug, thiserror::Error)]
#[error("the KVM probe boot failed ({why}): this profile runs as `{instead}` where KVM is not usable")]
pub struct RunInstead {
    /// The profile to run instead.
    pub instead: String,
    /// Why KVM is not usable.
    pub why: String,
    /// The run directory given up (it holds builds and the probe, no boot).
    pub dir: PathBuf,
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
pub(super) fn record_host_state(ctx: &BootCtx) -> Result<()> {
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
        // no probe runs in any of these: the matrix decides
        let cases = [
            ("tcg", "quick", Some(("exact", "the matrix asks for TCG"))),
            ("kvm", "quick", None),
            ("tcg", "exact", None),
        ];
        for (accel, profile, want) in cases {
            let path = two_profiles(tmp.path(), accel);
            let m = for_this_host(config::load(&path, Some(profile)).unwrap(), &work).unwrap();
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
            assert_eq!(after_probe(probe), want);
        }
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
