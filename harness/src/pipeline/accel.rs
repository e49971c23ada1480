//! The accelerator and the clock of a run: TCG when the matrix or its clock
//! asks for it, when /dev/kvm does not open, or when a probe boot on this
//! host and QEMU failed before; otherwise KVM, proved by one short probe
//! boot before any job. The clock the numbers are in goes to `run.json`.

use std::path::Path;

use anyhow::{bail, Result};

use super::Kernels;
use crate::boot::{self, BootCtx};
use crate::config::{AccelChoice, Clock, Matrix};
use crate::host;
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::{self, Accel, MeasureClock};

/// The accelerator before any boot: TCG when the matrix or its clock asks
/// for it, when /dev/kvm does not open, or when a probe on this host and
/// QEMU failed before; otherwise KVM, which the probe boot must prove.
pub(super) fn first_accel(m: &Matrix, run: &Run, ui: &Ui, work: &Path, probe_key: &str) -> Result<Accel> {
    let why = match (m.guest.accel, m.guest.clock) {
        (AccelChoice::Tcg, _) => return Ok(Accel::Tcg),
        (AccelChoice::Kvm, _) => return Ok(Accel::Kvm),
        (AccelChoice::Auto, Clock::Icount) => return Ok(Accel::Tcg),
        (AccelChoice::Auto, Clock::Wall) => match (vm::kvm_precheck(), host::failed_probe(work, probe_key)) {
            (Some(why), _) => why,
            (None, Some(failed)) => format!(
                "KVM is not usable here (a probe boot failed on {}: {}); delete {} to probe again",
                failed.when,
                failed.reason,
                host::probe_path(work).display()
            ),
            (None, None) => return Ok(Accel::Kvm),
        },
    };
    run.notice(ui, format!("{why}; using TCG (-accel tcg,thread=multi)"))?;
    Ok(Accel::Tcg)
}

/// The KVM probe stage: one short 1-vCPU boot of the first kernel that
/// built. A failure QEMU blames on KVM is remembered for this host kernel and
/// QEMU version; any other failure only sends this run to TCG.
pub(super) fn probe_stage(ctx: &BootCtx, kernels: &Kernels, work: &Path, probe_key: &str) -> Result<Accel> {
    let Some((art, initrd)) = kernels.values().find_map(|k| k.as_ref().ok()) else { return Ok(Accel::Kvm) };
    ctx.ui.stage("probe", "booting once under KVM to see whether it works here");
    let kernel = art.boot_image(ctx.m.guest.pvh);
    let dir = ctx.run.log("kvm-probe");
    let Some((why, kvm_fault)) = boot::probe_kvm(ctx, kernel, initrd, &dir)? else { return Ok(Accel::Kvm) };
    if kvm_fault {
        host::remember_failed_probe(work, probe_key, &why)?;
    }
    ctx.run.notice(ctx.ui, format!("KVM is not usable here (probe boot failed: {why}); falling back to TCG (-accel tcg,thread=multi)"))?;
    Ok(Accel::Tcg)
}

/// Writes the clock the run's numbers are in to `run.json`.
pub(super) fn record_clock(run: &Run, clock: MeasureClock) -> Result<()> {
    if run.shard.is_some() {
        // run.json is the build's; each boot record carries its clock, and
        // the report says when shards measured in different ones
        return Ok(());
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
