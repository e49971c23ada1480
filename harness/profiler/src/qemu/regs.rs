//! Reading the current vCPU's registers and memory from a callback: the
//! register handles found once at the first vCPU's start, and a per-thread
//! buffer for QEMU's reads.

use std::ffi::c_uint;
use std::sync::atomic::{AtomicUsize, Ordering};

use qemu_plugin::sys::{
    qemu_plugin_get_registers, qemu_plugin_id_t, qemu_plugin_read_memory_vaddr, qemu_plugin_read_register,
    qemu_plugin_reg_descriptor, qemu_plugin_register, GArray, GByteArray,
};

use super::g;

// GLib, as linked into QEMU.
unsafe extern "C" {
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_byte_array_set_size(array: *mut GByteArray, len: c_uint) -> *mut GByteArray;
    fn g_array_free(array: *mut GArray, free_segment: bool) -> *mut u8;
}

pub(super) unsafe extern "C" fn on_vcpu_init(_id: qemu_plugin_id_t, _vcpu: c_uint) {
    let g = g();
    if g.rsp.load(Ordering::Relaxed) != 0 {
        return;
    }
    // SAFETY: called in the vCPU's context, as the API requires.
    let arr = unsafe { qemu_plugin_get_registers() };
    if arr.is_null() {
        return;
    }
    // SAFETY: a GArray of descriptors, freed below (not its strings).
    unsafe {
        let descs = std::slice::from_raw_parts((*arr).data as *const qemu_plugin_reg_descriptor, (*arr).len as usize);
        for d in descs {
            let name = std::ffi::CStr::from_ptr(d.name).to_bytes();
            let slot = match name {
                b"rax" => &g.rax,
                b"rcx" => &g.rcx,
                b"rsp" => &g.rsp,
                b"rdi" => &g.rdi,
                b"gs_base" => &g.gs,
                b"k_gs_base" => &g.kgs,
                _ => continue,
            };
            slot.store(d.handle as usize, Ordering::Relaxed);
        }
        g_array_free(arr, true);
    }
}

thread_local! {
    static BUF: *mut GByteArray = unsafe { g_byte_array_new() };
}

/// A 64-bit register of the current vCPU (callback with R_REGS only).
pub(super) fn read_reg(handle: &AtomicUsize) -> Option<u64> {
    let h = handle.load(Ordering::Relaxed);
    if h == 0 {
        return None;
    }
    BUF.with(|&b| {
        // SAFETY: our own GByteArray; the handle came from QEMU.
        unsafe {
            g_byte_array_set_size(b, 0);
            let n = qemu_plugin_read_register(h as *mut qemu_plugin_register, b);
            (n == 8 && (*b).len == 8).then(|| u64::from_le_bytes(*((*b).data as *const [u8; 8])))
        }
    })
}

/// 8 bytes of guest memory at a virtual address of the current vCPU.
pub(super) fn read_u64(addr: u64) -> Option<u64> {
    BUF.with(|&b| {
        // SAFETY: QEMU resizes our GByteArray to 8 bytes on success.
        unsafe {
            (qemu_plugin_read_memory_vaddr(addr, b, 8) && (*b).len == 8)
                .then(|| u64::from_le_bytes(*((*b).data as *const [u8; 8])))
        }
    })
}
