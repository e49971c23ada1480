//! What a boot saw, as the run files hold it: the console's findings and
//! the CPU time of a sample window. Owned here and made from `vm`'s and
//! `bench`'s own values where a boot is recorded, so an edit of those
//! modules cannot change the files.

use serde::{Deserialize, Serialize};

use crate::{bench, vm};

/// Kinds of trouble a console can show.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    /// Kernel panic.
    Panic,
    /// Oops / general protection fault.
    Oops,
    /// BUG: (other than soft lockup and sleeping-in-atomic).
    Bug,
    /// WARNING: at/CPU.
    Warn,
    /// Lockdep report.
    Lockdep,
    /// Soft lockup.
    SoftLockup,
    /// RCU stall.
    RcuStall,
    /// Hung task.
    HungTask,
}

/// One finding: its kind and a one-line signature (kind + first function of
/// the call trace).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Finding {
    /// Kind.
    pub kind: Trouble,
    /// The console line that announced it.
    pub line: String,
    /// `kind: function` when a call trace followed.
    pub signature: String,
}

/// CPU time split over a sample window, from two `/proc/stat` cpu lines.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct CpuWindow {
    /// Fraction of CPU time idle (idle + iowait).
    pub idle: f64,
    /// Fraction stolen by the hypervisor.
    pub steal: f64,
}

impl From<vm::Trouble> for Trouble {
    fn from(t: vm::Trouble) -> Trouble {
        match t {
            vm::Trouble::Panic => Trouble::Panic,
            vm::Trouble::Oops => Trouble::Oops,
            vm::Trouble::Bug => Trouble::Bug,
            vm::Trouble::Warn => Trouble::Warn,
            vm::Trouble::Lockdep => Trouble::Lockdep,
            vm::Trouble::SoftLockup => Trouble::SoftLockup,
            vm::Trouble::RcuStall => Trouble::RcuStall,
            vm::Trouble::HungTask => Trouble::HungTask,
        }
    }
}

impl From<vm::Finding> for Finding {
    fn from(f: vm::Finding) -> Finding {
        Finding {
            kind: f.kind.into(),
            line: f.line,
            signature: f.signature,
        }
    }
}

impl From<bench::CpuWindow> for CpuWindow {
    fn from(c: bench::CpuWindow) -> CpuWindow {
        CpuWindow {
            idle: c.idle,
            steal: c.steal,
        }
    }
}

/// The records of `findings`.
pub fn findings(findings: Vec<vm::Finding>) -> Vec<Finding> {
    findings.into_iter().map(Finding::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_keeps_its_words_in_the_files() {
        let f = vm::Finding {
            kind: vm::Trouble::SoftLockup,
            line: "watchdog: BUG: soft lockup".into(),
            signature: "soft_lockup: f".into(),
        };
        assert_eq!(
            serde_json::to_string(&Finding::from(f.clone())).unwrap(),
            serde_json::to_string(&f).unwrap()
        );
        let c = bench::CpuWindow { idle: 0.25, steal: 0.5 };
        assert_eq!(
            serde_json::to_string(&CpuWindow::from(c)).unwrap(),
            r#"{"idle":0.25,"steal":0.5}"#
        );
    }
}
