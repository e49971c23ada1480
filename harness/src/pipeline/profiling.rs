//! Whether a run's boots carry kernel profiles: the matrix asks for them
//! (`guest.kernel_profile`, on by default under icount), the boots run
//! under the instruction-counting clock, and the profiler plugin is built.
//! Each kernel's symbols file is written into its cache directory once.

use std::path::PathBuf;

use anyhow::Result;

use super::Kernels;
use crate::config::Matrix;
use crate::profile::symbols;
use crate::records::MeasureClock;
use crate::store::Run;
use crate::ui::Ui;
use crate::vm;

/// The plugin the run's boots load, or `None` (said once, with how to
/// build it, when only the build is missing). Writes every built kernel's
/// symbols file; a kernel whose symbols cannot be written boots without a
/// profile (the boot says so).
pub(super) fn profiler(
    run: &Run,
    m: &Matrix,
    ui: &Ui,
    clock: MeasureClock,
    kernels: &Kernels,
) -> Result<Option<PathBuf>> {
    if !m.guest.kernel_profile || clock != MeasureClock::TcgIcount {
        return Ok(None);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let found = vm::find_profiler(&exe, std::env::var_os(vm::PROFILER_ENV).as_deref());
    with_plugin(run, ui, found, kernels)
}

/// [`profiler`] once the plugin was looked for: `found`.
fn with_plugin(run: &Run, ui: &Ui, found: Option<PathBuf>, kernels: &Kernels) -> Result<Option<PathBuf>> {
    let Some(so) = found else {
        let msg = format!(
            "no kernel profiles in this run: the profiler plugin is not built (build it with `cargo build --release -p harness-profiler`, or set {} to its {})",
            vm::PROFILER_ENV,
            vm::PROFILER_SO
        );
        run.notice(ui, msg)?;
        return Ok(None);
    };
    for (variant, k) in kernels {
        let Ok((art, _)) = k else { continue };
        if let Err(e) = symbols::ensure_all(&art.vmlinux, &art.dir) {
            run.notice(
                ui,
                format!("{variant}: no kernel profiles: write its symbols file: {e:#}"),
            )?;
        }
    }
    Ok(Some(so))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::build::Artifact;
    use crate::records::Event;

    #[test]
    fn symbols_are_written_once_per_kernel_and_a_missing_plugin_said_once() {
        let d = tempfile::tempdir().unwrap();
        let run = Run::create(d.path(), "t").unwrap();
        let ui = Ui::new(0, true);
        let kdir = d.path().join("kernels/k1");
        std::fs::create_dir_all(&kdir).unwrap();
        // any ELF with code symbols stands in for a vmlinux
        let vmlinux = std::env::current_exe().unwrap();
        let art = Artifact {
            key: "k1".into(),
            dir: kdir.clone(),
            bzimage: kdir.join("bzImage"),
            vmlinux,
            modules: None,
            release: "6.12".into(),
            build_s: 1.0,
            nr_cpus: None,
        };
        let mut kernels: Kernels = Default::default();
        kernels.insert("base".into(), Ok((art, d.path().join("base.cpio"))));
        kernels.insert("broken".into(), Err("build failed".into()));
        assert_eq!(with_plugin(&run, &ui, None, &kernels).unwrap(), None);
        assert!(!kdir.join(symbols::FILE).exists(), "no symbols without a plugin");
        let so = d.path().join("p.so");
        assert_eq!(with_plugin(&run, &ui, Some(so.clone()), &kernels).unwrap(), Some(so));
        assert!(
            std::fs::read_to_string(kdir.join(symbols::FILE))
                .unwrap()
                .lines()
                .count()
                > 100
        );
        let notices: Vec<String> = run
            .events()
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                Event::Notice { message } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].contains(
                "the profiler plugin is not built (build it with `cargo build --release -p harness-profiler`"
            ),
            "{notices:?}"
        );
    }
}
