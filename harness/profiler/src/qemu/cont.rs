//! The contention counts' glue (`contention=on`): the memory callback on
//! every kernel atomic read-modify-write, the entry callbacks on the
//! kernel's lock functions, the executing vCPU found by its per-CPU base,
//! and each vCPU's instruction count for lock holds (the counting itself is
//! `crate::contention`).

use std::collections::HashMap;
use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use qemu_plugin::sys::qemu_plugin_meminfo_t;

use super::{g, on_block, read_reg, read_u64, Global};
use crate::contention::{Data, Role, State, Watch};
use crate::symbols::Symbols;
use crate::syscalls;

/// The contention counter (`contention=on`).
pub(super) struct Cont {
    pub(super) data: Data,
    pub(super) watch: Watch,
    /// Instructions each vCPU executed so far, by QEMU's vCPU index: a
    /// hold is the holder's own instructions. (One count over every vCPU
    /// also took in the slices of the other vCPUs that QEMU's round robin
    /// ran while the holder waited for its turn: at 256 vCPUs a hold that
    /// spans a turn grew by up to a whole round.) Each is written only by
    /// its vCPU's thread.
    insns: Box<[AtomicU64]>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
pub(super) struct Inner {
    /// Per-CPU base → vCPU ordinal, in order of first sight.
    ordinals: HashMap<u64, u16>,
    pub(super) st: State,
}

impl Cont {
    /// The counter of the kernel in `syms` on `vcpus` vCPUs, with its
    /// static data from the data symbols file's text.
    pub(super) fn new(syms: &Symbols, data: &str, vcpus: u32) -> Result<Cont, String> {
        let data = Symbols::parse(data)?;
        let watch = Watch::of(syms);
        if watch.acquires() == 0 {
            eprintln!("harness-profiler: contention=on: no lock function in the symbols; only atomics are counted");
        }
        Ok(Cont {
            data: Data::new(data),
            watch,
            insns: (0..vcpus.max(1)).map(|_| AtomicU64::new(0)).collect(),
            inner: Mutex::new(Inner::default()),
        })
    }

    pub(super) fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    /// The ordinal of the vCPU whose per-CPU base is `base`.
    fn ordinal(&mut self, base: u64) -> u16 {
        let n = self.ordinals.len() as u16;
        *self.ordinals.entry(base).or_insert(n)
    }
}

/// The executing vCPU's per-CPU base: GS's base in the kernel, the
/// swapped-out kernel GS base in user space and at kernel entry before
/// `swapgs` (whichever is a kernel address: bit 63 set, under 4- and
/// 5-level paging alike; `-cpu max` has LA57, where the per-CPU areas lie
/// in the direct map at 0xff11…, below the 4-level kernel half). `None`
/// before the kernel has set up its per-CPU areas.
pub(super) fn percpu_base(g: &Global) -> Option<u64> {
    let kernel = |a: u64| a >> 63 == 1;
    let gs = read_reg(&g.gs)?;
    if kernel(gs) {
        return Some(gs);
    }
    read_reg(&g.kgs).filter(|&k| kernel(k))
}

/// A block was entered with contention counts on and no syscall tracker:
/// its counter as in `on_block`, and its instructions to the global count.
pub(super) unsafe extern "C" fn on_block_counted(vcpu: c_uint, udata: *mut c_void) {
    // SAFETY: udata is a leaked Block, never freed.
    let b = unsafe { &*(udata as *const syscalls::Block) };
    // SAFETY: as in on_block.
    unsafe { on_block(vcpu, b.counter as *mut c_void) };
    count(g(), vcpu, b.insns);
}

/// Adds a block's instructions to vCPU `vcpu`'s count, if contention is on.
pub(super) fn count(g: &Global, vcpu: c_uint, insns: u64) {
    if let Some(n) = g.cont.as_ref().and_then(|c| c.insns.get(vcpu as usize)) {
        // only this vCPU's thread writes it: no locked add needed
        n.store(n.load(Ordering::Relaxed) + insns, Ordering::Relaxed);
    }
}

/// A kernel atomic RMW stored to `vaddr`; udata is its function.
pub(super) unsafe extern "C" fn on_rmw(_vcpu: c_uint, _info: qemu_plugin_meminfo_t, vaddr: u64, udata: *mut c_void) {
    let g = g();
    let Some(c) = &g.cont else { return };
    if !g.open.load(Ordering::Relaxed) {
        return;
    }
    let Some(base) = percpu_base(g) else { return };
    let mut inner = c.inner();
    let v = inner.ordinal(base);
    inner.st.rmw(v, vaddr, udata as usize as u32);
}

/// A watched lock function was entered; udata is its function.
pub(super) unsafe extern "C" fn on_lock_fn(vcpu: c_uint, udata: *mut c_void) {
    let g = g();
    let Some(c) = &g.cont else { return };
    if !g.open.load(Ordering::Relaxed) {
        return;
    }
    let func = udata as usize as u32;
    let (Some(role), Some(base), Some(lock)) = (c.watch.roles.get(&func), percpu_base(g), read_reg(&g.rdi)) else {
        return;
    };
    let now = c.insns.get(vcpu as usize).map_or(0, |n| n.load(Ordering::Relaxed));
    match *role {
        Role::Acquire(kind, hold) => {
            // the caller: the return address at the stack pointer
            let caller = read_reg(&g.rsp)
                .and_then(read_u64)
                .map(|ret| g.syms.locate(ret.wrapping_sub(1)))
                .unwrap_or(g.syms.slots() as u32);
            let mut inner = c.inner();
            let v = inner.ordinal(base);
            inner.st.acquire(v, lock, kind, caller, now, hold);
        }
        Role::Release(kind) => {
            let mut inner = c.inner();
            let v = inner.ordinal(base);
            inner.st.release(v, lock, kind, now);
        }
    }
}
