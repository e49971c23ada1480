//! harness-profiler: a QEMU TCG plugin (x86-64 system emulation, plugin API
//! v4 = QEMU 10.0) that counts, per guest kernel function and exactly over
//! a window the guest opens and closes itself, instructions executed, calls
//! (executions of the first instruction), atomic read-modify-write
//! instructions, `pause` instructions and callers; with `contention=on`
//! also the cache lines several vCPUs write with atomics and the locks they
//! share ([`contention`]). See README.md for the
//! arguments, the marker protocol and the profile format.

pub mod contention;
pub mod decode;
pub mod symbols;
pub mod syscalls;
pub mod tally;

#[cfg(test)]
mod golden;

#[cfg(not(test))]
mod qemu;

/// `cpuid` leaf (EAX) that opens the measurement window.
pub const MARK_OPEN: u32 = 0x4b50_0001;
/// `cpuid` leaf (EAX) that closes it; RCX then holds the window's op count
/// (0: not given).
pub const MARK_CLOSE: u32 = 0x4b50_0002;
