//! Why a step failed, as types: the [`Stage`] it failed in and its
//! [`Cause`], stored in the step's event ([`Failed`], an optional field so
//! runs recorded before it still read). Callers decide from these — an exit
//! code, whether a failure is the kernel's — never from a message's words;
//! the message stays for people.

use serde::{Deserialize, Serialize};

/// The step of a variant or a boot job a failure happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Applying or reverting the variant's series.
    Patch,
    /// Configuring the variant's kernel.
    Config,
    /// Building it.
    Build,
    /// Booting it: from QEMU's start to SSH and the guest's environment.
    Boot,
    /// Running the benchmarks in the booted guest.
    Benchmark,
}

impl Stage {
    /// The variant could not be made (its patch, config or build failed),
    /// so none of its jobs can boot.
    pub fn makes_the_variant(self) -> bool {
        matches!(self, Stage::Patch | Stage::Config | Stage::Build)
    }
}

/// Why a step failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A series does not apply (or, reverted, is not in the base; applied,
    /// is already in it).
    Conflict,
    /// The kernel config could not be made.
    Config,
    /// The compiler or `make` failed.
    Compile,
    /// The build ran past `kernel.build_timeout_min`.
    BuildTimeout,
    /// The job's variant was never built (its build's record says why).
    NotBuilt,
    /// The kernel panicked.
    Panic,
    /// No SSH within the boot deadline (host seconds, or guest seconds
    /// under icount).
    BootTimeout,
    /// The guest stopped answering: no result from a benchmark within its
    /// timeout and the grace after it.
    GuestHung,
    /// QEMU died from a signal by itself (an assertion, a segfault, the
    /// host's OOM killer): QEMU's failure, not the kernel's.
    QemuSignal,
    /// QEMU exited by itself before SSH came up.
    QemuExit,
    /// QEMU runs but cannot serve the guest: no SSH forward, or a KVM
    /// guest it stopped.
    Qemu,
    /// SSH failed otherwise: a foreign host key, a broken channel.
    Ssh,
    /// A benchmark was killed at its timeout.
    BenchTimeout,
    /// A benchmark exited with an error or printed nothing readable.
    BenchError,
    /// A repetition made no progress: it ran its duration and counted no
    /// operation (a rate of 0 is no measurement).
    NoProgress,
    /// The job was not booted: the boots of its variant at its vCPU count
    /// before it failed before SSH, one after the other
    /// (`boot::BOOTS_BEFORE_GIVING_UP`).
    NotBooted,
    /// A guest command's output went over the harness's limit
    /// (`guest::MAX_OUTPUT`): the repetition is no measurement.
    OutputOverLimit,
    /// The shard that owed the job failed or never ran.
    ShardLost,
    /// Something on the host side failed (SSH, a file, a process).
    HostError,
}

impl Cause {
    /// Not the kernel's doing: a QEMU crash is QEMU's failure (the job
    /// boots again while attempts are left). An interruption never becomes
    /// a cause: it is not a failed step.
    pub fn spurious(self) -> bool {
        matches!(self, Cause::QemuSignal)
    }
}

/// Where and why a step failed: the `failed` field of its event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Failed {
    /// The step.
    pub stage: Stage,
    /// Why.
    pub cause: Cause,
}

impl Failed {
    /// A failure of `stage` from `cause`.
    pub const fn new(stage: Stage, cause: Cause) -> Failed {
        Failed { stage, cause }
    }

    /// Not the kernel's doing ([`Cause::spurious`]).
    pub fn spurious(&self) -> bool {
        self.cause.spurious()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_qemu_crash_is_spurious() {
        assert!(Cause::QemuSignal.spurious());
        for c in [
            Cause::Conflict,
            Cause::Compile,
            Cause::Panic,
            Cause::GuestHung,
            Cause::QemuExit,
            Cause::BenchError,
            Cause::HostError,
        ] {
            assert!(!c.spurious(), "{c:?}");
        }
        assert!(Failed::new(Stage::Benchmark, Cause::QemuSignal).spurious());
    }

    #[test]
    fn stored_as_plain_words() {
        let f = Failed::new(Stage::Build, Cause::BuildTimeout);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"stage":"build","cause":"build_timeout"}"#
        );
        assert_eq!(
            serde_json::from_str::<Failed>(r#"{"stage":"boot","cause":"qemu_signal"}"#).unwrap(),
            Failed::new(Stage::Boot, Cause::QemuSignal)
        );
        assert!(Stage::Config.makes_the_variant() && !Stage::Boot.makes_the_variant());
    }

    #[test]
    fn events_recorded_before_causes_still_read() {
        use crate::records::Event;
        let old = r#"{"event":"boot_end","variant":"v","vcpus":2,"boot":0,"boot_id":null,"findings":[],"error":"variant not built: build failed: x"}"#;
        let e: Event = serde_json::from_str(old).unwrap();
        assert_eq!(e.failed(), None);
        let Event::BootEnd { failed, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!(failed, None);
        let new = old.replace("}", r#","failed":{"stage":"boot","cause":"not_built"}}"#);
        let e: Event = serde_json::from_str(&new).unwrap();
        assert_eq!(e.failed(), Some(Failed::new(Stage::Boot, Cause::NotBuilt)));
        assert!(serde_json::to_string(&e)
            .unwrap()
            .ends_with(r#""failed":{"stage":"boot","cause":"not_built"}}"#));
    }
}
