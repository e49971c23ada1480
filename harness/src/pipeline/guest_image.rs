//! A run's guest image: the benchmarks compiled, the run's SSH keys, the
//! initramfs part every kernel shares, and each built kernel's initramfs
//! with its modules; the image's host files pinned in `run.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::variants::Built;
use crate::bench;
use crate::config::Matrix;
use crate::image::{self, Archive};
use crate::kernel::build::Artifact;
use crate::store::Run;
use crate::ui::Ui;
use crate::workdir::WorkDir;

/// Each variant's kernel and initramfs, or why it could not be made.
pub(super) type Kernels = BTreeMap<String, Result<(Artifact, PathBuf), String>>;

/// A notice for each benchmark that will not fit in the guest's memory
/// (test_vmalloc's need grows with threads and CPUs).
pub(super) fn warn_guest_memory(run: &Run, m: &Matrix, ui: &Ui) -> Result<()> {
    for &n in &m.vcpus {
        for (b, need) in bench::short_of_memory(m, n) {
            let msg = format!(
                "{} at {n} vCPUs needs ~{need} MiB of guest memory but guest.memory_mib is {}; expect failures or lower its threads/workers",
                b.name, m.guest.memory_mib
            );
            run.notice(ui, msg)?;
        }
    }
    Ok(())
}

/// What every guest image of a run shares, and where its images go.
pub(super) struct GuestParts {
    /// The private directory of the keys and images.
    dir: PathBuf,
    /// The run's SSH keys.
    pub(super) keys: image::Keys,
    /// The initramfs part shared by every kernel (newc cpio).
    common: Vec<u8>,
}

/// Compiles the benchmarks (sources in `images`) and makes the SSH keys.
/// Private keys, and the images that hold the host key, stay in the work
/// directory `work`.
pub(super) fn guest_parts(run: &Run, m: &Matrix, images: &Path, work: &WorkDir, ui: &Ui) -> Result<GuestParts> {
    ui.stage("image", "compiling benchmarks, making the SSH keys");
    let benches = image::compile_benchmarks(images, &run.records().join("image/bin"), &run.log("image.log"))?;
    // `work/keys/<run-id>/`, never under `runs/`, which travels with archived runs
    let keys_dir = work.run_keys(&run.id);
    let dir = match run.shard {
        Some(s) => keys_dir.join(format!("shard-{}-of-{}", s.k, s.n)),
        None => keys_dir,
    };
    let keys = image::make_keys(&dir, &run.log("image.log"))?;
    let programs = image::program_files(m, images, &run.records().join("image/bin"), &run.log("image.log"))?;
    let common = image::common_archive(&image::HostBins::find()?, &benches, &programs, &keys)?.to_cpio();
    pin_image(run)?;
    Ok(GuestParts { dir, keys, common })
}

/// Writes the guest image's host files, as the image was just made of
/// them, into `run.json` (a shard's run is pinned by its build; a resume
/// was refused if they changed).
fn pin_image(run: &Run) -> Result<()> {
    if run.shard.is_some() {
        return Ok(());
    }
    let mut meta = run.meta()?;
    let Some(inputs) = meta.inputs.as_mut() else {
        return Ok(());
    };
    inputs.set_image_parts(image::image_parts()?);
    run.write_meta(&meta)
}

/// Each built kernel with its initramfs: the shared part and the kernel's
/// modules, written to `<variant>.cpio`.
pub(super) fn initrds(guest: &GuestParts, arts: Built<Artifact>) -> Result<Kernels> {
    let mut kernels: Kernels = BTreeMap::new();
    for (name, art) in arts {
        let r = match art {
            Ok(art) => {
                let initrd = guest.dir.join(format!("{name}.cpio"));
                let mut data = guest.common.clone();
                match &art.modules {
                    Some(mods) => data.extend(image::modules_archive(mods, &art.release)?.to_cpio()),
                    None => data.extend(Archive::default().to_cpio()),
                }
                std::fs::write(&initrd, data).with_context(|| format!("write {}", initrd.display()))?;
                Ok((art, initrd))
            }
            Err(e) => Err(e),
        };
        kernels.insert(name, r);
    }
    Ok(kernels)
}
