//! The syscall tracker's glue (`syscalls=on`): where a syscall enters
//! and switches in this kernel, each vCPU's call in flight, and the block
//! callback that feeds them (the counting itself is `crate::syscalls`).

use std::ffi::{c_uint, c_void};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::cont::{count, percpu_base};
use super::{g, on_block, read_reg};
use crate::symbols::{Symbols, KERNEL_HALF};
use crate::syscalls::{self, Kind};

/// The syscall tracker (`syscalls=on`, see `syscalls.rs`).
pub(super) struct Sys {
    entry: u64,
    switch: u64,
    /// Each vCPU's call in flight, keyed by its per-CPU base (see
    /// `syscalls::Seats`); with one vCPU, by the constant 1.
    seats: syscalls::Seats,
    /// Whether the executing vCPU must be found from its registers (more
    /// than one vCPU): every block's callback then reads registers.
    pub(super) whoami: bool,
    windows: Mutex<syscalls::Windows>,
}

impl Sys {
    /// The tracker of the kernel in `syms`, or why there is none.
    pub(super) fn new(syms: &Symbols, vcpus: u32) -> std::result::Result<Sys, String> {
        let at = |name: &str| {
            syms.find(name)
                .map(|i| syms.start(i))
                .ok_or(format!("no {name} in the symbols"))
        };
        Ok(Sys {
            entry: at("entry_SYSCALL_64")?,
            switch: at("__switch_to")?,
            seats: syscalls::Seats::new(vcpus as usize),
            whoami: vcpus > 1,
            windows: Mutex::new(syscalls::Windows::default()),
        })
    }

    pub(super) fn kind(&self, va: u64) -> Kind {
        match va {
            v if v < KERNEL_HALF => Kind::User,
            v if v == self.entry => Kind::Entry,
            v if v == self.switch => Kind::Switch,
            _ => Kind::Kernel,
        }
    }

    pub(super) fn windows(&self) -> std::sync::MutexGuard<'_, syscalls::Windows> {
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A block was entered with the syscall tracker on: its counter as in
/// `on_block`, then the vCPU's call in flight.
pub(super) unsafe extern "C" fn on_block_sys(vcpu: c_uint, udata: *mut c_void) {
    // SAFETY: udata is a leaked Block, never freed.
    let b = unsafe { &*(udata as *const syscalls::Block) };
    // SAFETY: as in on_block.
    unsafe { on_block(vcpu, b.counter as *mut c_void) };
    let g = g();
    count(g, vcpu, b.insns);
    let Some(sys) = &g.sys else { return };
    let key = if sys.whoami { percpu_base(g) } else { Some(1) };
    let Some(v) = key.and_then(|k| sys.seats.get(k)) else {
        return;
    };
    if let Some(done) = v.step(b.kind, b.insns, || read_reg(&g.rax)) {
        if g.open.load(Ordering::Relaxed) {
            sys.windows().open.add(done);
        }
    }
}
