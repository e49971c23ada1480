//! The clock a boot's numbers are in, as the run files hold it: the
//! accelerator ([`Accel`], the vocabulary's) and the guest clock together.

use serde::{Deserialize, Serialize};

use crate::config::Clock;
use crate::vocab::Accel;

/// The clock a number was measured in: the accelerator and the guest clock
/// together. Numbers of different clocks are never compared.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MeasureClock {
    /// Host time under KVM: the reference on real cores.
    KvmWall,
    /// Host time under multi-threaded TCG: noisy on a busy host.
    TcgWall,
    /// QEMU's instruction-counting clock under single-threaded TCG.
    TcgIcount,
}

impl MeasureClock {
    /// The clock of a guest run under `accel` with the guest clock `clock`.
    pub fn of(accel: Accel, clock: Clock) -> MeasureClock {
        match (accel, clock) {
            (Accel::Kvm, _) => MeasureClock::KvmWall,
            (Accel::Tcg, Clock::Wall) => MeasureClock::TcgWall,
            (Accel::Tcg, Clock::Icount) => MeasureClock::TcgIcount,
        }
    }

    /// Short name, as in records: `kvm-wall`, `tcg-wall`, `tcg-icount`.
    pub fn name(self) -> &'static str {
        match self {
            MeasureClock::KvmWall => "kvm-wall",
            MeasureClock::TcgWall => "tcg-wall",
            MeasureClock::TcgIcount => "tcg-icount",
        }
    }

    /// What a number in this clock means, for report headers.
    pub fn describe(self) -> &'static str {
        match self {
            MeasureClock::KvmWall => "wall clock under KVM: seconds are host seconds on real cores (the reference)",
            MeasureClock::TcgWall => {
                "wall clock under multi-threaded TCG: seconds are host seconds of an emulated guest (noisy; no lock contention of real cores)"
            }
            MeasureClock::TcgIcount => {
                "instruction-counting clock under TCG (-icount shift=0,sleep=off): a guest second is 10^9 guest \
                 instructions over all vCPUs, so a rate \"per second\" is per 10^9 instructions; it counts the executed \
                 path (spinning included), not cache misses, memory latency or true parallel contention"
            }
        }
    }

    /// A benchmark's unit as it reads in this clock: under icount a guest
    /// second is 10^9 instructions, so `execs/s` is `execs/Ginsn`, `s` is
    /// `guest-s` and `usec` is `guest-usec`.
    pub fn unit(self, unit: &str) -> String {
        if self != MeasureClock::TcgIcount {
            return unit.to_string();
        }
        match unit {
            "s" => "guest-s".into(),
            "usec" => "guest-usec".into(),
            u => match u.strip_suffix("/s") {
                Some(what) => format!("{what}/Ginsn"),
                None => u.to_string(),
            },
        }
    }

    /// How a "per second" unit reads in this clock.
    pub fn per_second(self) -> &'static str {
        match self {
            MeasureClock::TcgIcount => "per 10^9 guest instructions",
            _ => "per second",
        }
    }
}

impl std::fmt::Display for MeasureClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_is_the_accelerator_and_the_guest_clock() {
        assert_eq!(MeasureClock::of(Accel::Tcg, Clock::Icount).name(), "tcg-icount");
        assert_eq!(MeasureClock::of(Accel::Kvm, Clock::Icount), MeasureClock::KvmWall);
        assert_eq!(MeasureClock::of(Accel::Tcg, Clock::Wall), MeasureClock::TcgWall);
        let icount = MeasureClock::TcgIcount;
        assert_eq!(
            [
                icount.unit("execs/s"),
                icount.unit("s"),
                icount.unit("usec"),
                icount.unit("ops")
            ],
            ["execs/Ginsn", "guest-s", "guest-usec", "ops"]
        );
        assert_eq!(MeasureClock::KvmWall.unit("execs/s"), "execs/s");
    }

    #[test]
    fn accelerators_keep_their_names_in_the_files() {
        let names: Vec<String> = [Accel::Kvm, Accel::Tcg]
            .map(|a| serde_json::to_string(&a).unwrap())
            .to_vec();
        assert_eq!(names, ["\"kvm\"", "\"tcg\""]);
    }
}
