//! Whether a run's boots carry kernel profiles: the matrix asks for them
//! (`guest.kernel_profile`, on by default under icount), the boots run
//! under the instruction-counting clock, and the profiler plugin is built.
//! Each kernel's symbols file is written into its cache directory once.

use std::path::PathBuf;

use anyhow::Result;

use super::Kernels;
use crate::config::Matrix;
use crate::profile::symbols;
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::{self, MeasureClock};

/// The plugin the run's boots load, or `None` (said once, with how to
/// build it, when only the build is missing). Writes every built kernel's
/// symbols file; a kernel whose symbols cannot be written boots without a
/// profile (the boot says so).
pub(super) fn profiler(run: &Run, m: &Matrix, ui: &Ui, clock: MeasureClock, kernels: &Kernels) -> Result<Option<PathBuf>> {
    if !m.guest.kernel_profile || clock != MeasureClock::TcgIcount {
        return Ok(None);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let Some(so) = vm::find_profiler(&exe, std::env::var_os(vm::PROFILER_ENV).as_deref()) else {
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
        if let Err(e) = symbols::ensure(&art.vmlinux, &art.dir.join(symbols::FILE)) {
            run.notice(ui, format!("{variant}: no kernel profiles: write its symbols file: {e:#}"))?;
        }
    }
    Ok(Some(so))
}
