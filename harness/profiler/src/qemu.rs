//! The glue to QEMU's plugin API (v4, QEMU 10.0): arguments, the
//! translation callback that records each block's composition and adds one
//! inline per-vCPU counter, the `cpuid` marker callback, optional entry
//! callbacks for exact callers, and writing the profile.
//!
//! Only `install` runs through the `qemu-plugin` crate's safe layer; the
//! hot paths call the raw API so that no closure is boxed per block.

use std::collections::HashMap;
use std::ffi::{c_uint, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use qemu_plugin::install::{Args, Info};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::sys::{
    qemu_plugin_cb_flags, qemu_plugin_id_t, qemu_plugin_insn, qemu_plugin_insn_data, qemu_plugin_insn_size,
    qemu_plugin_insn_vaddr, qemu_plugin_mem_rw, qemu_plugin_num_vcpus, qemu_plugin_op, qemu_plugin_register_atexit_cb,
    qemu_plugin_register_vcpu_init_cb, qemu_plugin_register_vcpu_insn_exec_cb, qemu_plugin_register_vcpu_mem_cb,
    qemu_plugin_register_vcpu_tb_exec_cb, qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu,
    qemu_plugin_register_vcpu_tb_trans_cb, qemu_plugin_scoreboard, qemu_plugin_scoreboard_find,
    qemu_plugin_scoreboard_new, qemu_plugin_tb, qemu_plugin_tb_get_insn, qemu_plugin_tb_n_insns, qemu_plugin_u64,
};
use qemu_plugin::{register, Error, PluginId, Result};

use crate::decode;
use crate::symbols::Symbols;
use crate::syscalls::{self, Kind};
use crate::tally::{render, seal, Callers, Comp, Header, Tail, Window};
use crate::{MARK_CLOSE, MARK_OPEN};

mod cont;
mod regs;
mod sys;
use cont::{on_block_counted, on_lock_fn, on_rmw, Cont};
use regs::{on_vcpu_init, read_reg, read_u64};
use sys::{on_block_sys, Sys};

/// Block counters are allocated in chunks of this many.
const CHUNK: usize = 4096;

/// How an executed block bumps its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counting {
    /// A callback per executed block adds 1 to the block's counter in the
    /// plugin's own memory. Works under icount.
    Callback,
    /// An inline per-vCPU add on a QEMU scoreboard: cheaper, but in QEMU
    /// 10.0.2 any inline op breaks the guest under -icount (see README).
    Inline,
}

/// Counters of one chunk of slots.
enum Chunk {
    /// `CHUNK * vcpus` counters, vCPU-major: vCPU `v`, slot `s` at
    /// `v * CHUNK + s`, so one vCPU's counters are dense (eight blocks a
    /// cache line at any vCPU count: slot-major, a vCPU's blocks were
    /// `vcpus * 8` bytes apart, a line each from 8 vCPUs up). Never moved
    /// or freed, so a block's callback can hold the address of its slot.
    Own(Box<[AtomicU64]>),
    /// A scoreboard whose per-vCPU entry is `CHUNK` u64s.
    Board(*mut qemu_plugin_scoreboard),
}
// SAFETY: the scoreboard handle is only used through QEMU's thread-safe API;
// our own counters are atomics.
unsafe impl Send for Chunk {}

/// Where a block's execution is counted.
enum Counter {
    Own(*const AtomicU64),
    Board(qemu_plugin_u64),
}

#[derive(Default)]
struct State {
    chunks: Vec<Chunk>,
    comps: Vec<Comp>,
    index: HashMap<Comp, u32>,
    tails: Vec<Tail>,
    window: Window,
    blocks: u64,
    /// Exact-caller counts when the window opened (for per-window files).
    dyn_base: HashMap<(u32, u32), u64>,
}

impl State {
    /// Every counter summed over vCPUs.
    fn counters(&self, vcpus: u32) -> Vec<u64> {
        let n = self.comps.len();
        let mut v = vec![0u64; n];
        for (ci, ch) in self.chunks.iter().enumerate() {
            let lo = ci * CHUNK;
            let hi = n.min(lo + CHUNK);
            match ch {
                Chunk::Own(c) => {
                    for cpu in 0..vcpus as usize {
                        let own = &c[cpu * CHUNK..cpu * CHUNK + (hi - lo)];
                        for (slot, x) in v[lo..hi].iter_mut().zip(own) {
                            *slot += x.load(Ordering::Relaxed);
                        }
                    }
                }
                Chunk::Board(b) => {
                    // SAFETY: no vCPU is added while QEMU runs a callback.
                    let n_cpus = unsafe { qemu_plugin_num_vcpus() }.max(0) as c_uint;
                    for cpu in 0..n_cpus {
                        // SAFETY: the entry of vCPU `cpu` is CHUNK u64s.
                        let p = unsafe { qemu_plugin_scoreboard_find(*b, cpu) } as *const u64;
                        for (j, slot) in v[lo..hi].iter_mut().enumerate() {
                            // SAFETY: j < CHUNK.
                            *slot += unsafe { std::ptr::read_volatile(p.add(j)) };
                        }
                    }
                }
            }
        }
        v
    }

    /// The counter of a composition, made if new.
    fn counter(&mut self, comp: Comp, how: Counting, vcpus: u32) -> Counter {
        let slot = match self.index.get(&comp) {
            Some(&s) => s as usize,
            None => {
                let s = self.comps.len();
                if s / CHUNK == self.chunks.len() {
                    self.chunks.push(match how {
                        Counting::Callback => {
                            Chunk::Own((0..CHUNK * vcpus as usize).map(|_| AtomicU64::new(0)).collect())
                        }
                        // SAFETY: a plain allocation, zeroed by QEMU.
                        Counting::Inline => Chunk::Board(unsafe { qemu_plugin_scoreboard_new(CHUNK * 8) }),
                    });
                }
                self.index.insert(comp.clone(), s as u32);
                self.comps.push(comp);
                s
            }
        };
        match &self.chunks[slot / CHUNK] {
            Chunk::Own(c) => Counter::Own(&c[slot % CHUNK] as *const AtomicU64),
            Chunk::Board(b) => Counter::Board(qemu_plugin_u64 {
                score: *b,
                offset: (slot % CHUNK) * 8,
            }),
        }
    }
}

struct Global {
    syms: Symbols,
    out: PathBuf,
    all: bool,
    each: bool,
    counting: Counting,
    callers: Callers,
    top: usize,
    vcpus: u32,
    st: Mutex<State>,
    open: AtomicBool,
    rax: AtomicUsize,
    rcx: AtomicUsize,
    rsp: AtomicUsize,
    rdi: AtomicUsize,
    gs: AtomicUsize,
    kgs: AtomicUsize,
    dynamic: Vec<Mutex<HashMap<(u32, u32), u64>>>,
    sys: Option<Sys>,
    cont: Option<Cont>,
}

static G: OnceLock<Global> = OnceLock::new();

fn g() -> &'static Global {
    G.get().expect("harness-profiler: not installed")
}

fn fail(msg: String) -> Error {
    eprintln!("harness-profiler: {msg}");
    Error::BoxedError(msg.into())
}

/// The plugin object `register!` installs; all state is in `G`.
pub struct Profiler;

impl HasCallbacks for Profiler {}

impl Register for Profiler {
    fn register_default(&mut self, id: PluginId, args: &Args, info: &Info) -> Result<()> {
        let mut symbols = None;
        let mut out = None;
        let mut all = false;
        let mut each = false;
        let mut counting = Counting::Callback;
        let mut callers = Callers::Static;
        let mut top = 8usize;
        let mut sys = false;
        let mut contention = false;
        let mut data = None;
        for a in &args.raw {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| fail(format!("argument {a:?} is not key=value")))?;
            match k {
                "symbols" => symbols = Some(PathBuf::from(v)),
                "out" => out = Some(PathBuf::from(v)),
                "data" => data = Some(PathBuf::from(v)),
                "mode" => {
                    all = match v {
                        "marker" => false,
                        "all" => true,
                        _ => return Err(fail(format!("mode={v}: expected marker or all"))),
                    }
                }
                "callers" => {
                    callers = match v {
                        "off" => Callers::Off,
                        "static" => Callers::Static,
                        "full" => Callers::Full,
                        _ => return Err(fail(format!("callers={v}: expected off, static or full"))),
                    }
                }
                "syscalls" | "each" | "contention" => {
                    *(match k {
                        "each" => &mut each,
                        "syscalls" => &mut sys,
                        _ => &mut contention,
                    }) = match v {
                        "on" | "yes" | "true" => true,
                        "off" | "no" | "false" => false,
                        _ => return Err(fail(format!("{k}={v}: expected on or off"))),
                    }
                }
                "counter" => {
                    counting = match v {
                        "callback" => Counting::Callback,
                        "inline" => Counting::Inline,
                        _ => return Err(fail(format!("counter={v}: expected callback or inline"))),
                    }
                }
                "top" => top = v.parse().map_err(|_| fail(format!("top={v}: expected a number")))?,
                _ => {
                    return Err(fail(format!(
                        "unknown argument {k:?} (symbols, out, mode, each, counter, callers, top, syscalls, contention, data)"
                    )))
                }
            }
        }
        let symbols = symbols.ok_or_else(|| fail("symbols=PATH is required".into()))?;
        let out = out.ok_or_else(|| fail("out=PATH is required".into()))?;
        let text = std::fs::read_to_string(&symbols).map_err(|e| fail(format!("read {}: {e}", symbols.display())))?;
        let syms = Symbols::parse(&text).map_err(|e| fail(format!("{}: {e}", symbols.display())))?;
        if info.target_name != "x86_64" {
            return Err(fail(format!("target {} is not x86_64", info.target_name)));
        }
        let vcpus = info.system.as_ref().map(|s| s.max_vcpus.max(1) as u32).unwrap_or(1);
        if sys && counting == Counting::Inline {
            return Err(fail("syscalls=on needs counter=callback".into()));
        }
        if contention && counting == Counting::Inline {
            return Err(fail("contention=on needs counter=callback".into()));
        }
        let cont = if contention {
            let text = match &data {
                Some(p) => std::fs::read_to_string(p).map_err(|e| fail(format!("read {}: {e}", p.display())))?,
                None => {
                    eprintln!("harness-profiler: contention=on without data=PATH: no line is known to be static");
                    String::new()
                }
            };
            let what = data.as_ref().map_or(String::new(), |p| p.display().to_string());
            Some(Cont::new(&syms, &text, vcpus).map_err(|e| fail(format!("{what}: {e}")))?)
        } else {
            None
        };
        let sys = sys.then(|| Sys::new(&syms, vcpus)).and_then(|r| {
            r.map_err(|e| eprintln!("harness-profiler: syscalls=on: {e}; no syscall counts"))
                .ok()
        });
        let mut st = State::default();
        if all {
            st.window.open(Vec::new(), &Tail::default());
        }
        let global = Global {
            syms,
            out,
            all,
            each,
            counting,
            callers,
            top,
            vcpus,
            st: Mutex::new(st),
            open: AtomicBool::new(all),
            rax: AtomicUsize::new(0),
            rcx: AtomicUsize::new(0),
            rsp: AtomicUsize::new(0),
            rdi: AtomicUsize::new(0),
            gs: AtomicUsize::new(0),
            kgs: AtomicUsize::new(0),
            dynamic: (0..vcpus).map(|_| Mutex::new(HashMap::new())).collect(),
            sys,
            cont,
        };
        G.set(global).map_err(|_| fail("installed twice".into()))?;
        // SAFETY: registering plain extern "C" callbacks with our plugin id.
        unsafe {
            qemu_plugin_register_vcpu_init_cb(id, Some(on_vcpu_init));
            qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_tb));
            qemu_plugin_register_atexit_cb(id, Some(on_exit), std::ptr::null_mut());
        }
        Ok(())
    }
}

register!(Profiler);

struct InsnInfo {
    func: u32,
    va: u64,
    lock: bool,
    pause: bool,
    entry: bool,
    edge: Option<(u32, u32)>,
}

fn comp_of(infos: &[InsnInfo]) -> Comp {
    let mut c = Comp::default();
    for i in infos {
        c.push(i.func, i.lock, i.pause);
        if i.entry {
            c.entries.push(i.func);
        }
        if let Some(e) = i.edge {
            c.edges.push(e);
        }
    }
    c
}

unsafe extern "C" fn on_tb(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let g = g();
    let syms = &g.syms;
    // SAFETY: `tb` is valid for this callback.
    let n = unsafe { qemu_plugin_tb_n_insns(tb) };
    let mut infos = Vec::with_capacity(n);
    let mut first = None;
    let mut cpuids = Vec::new();
    let mut entries: Vec<(*mut qemu_plugin_insn, u32)> = Vec::new();
    let mut cur: Option<(u64, u64, u32)> = None; // the last function's range
    for i in 0..n {
        let mut bytes = [0u8; 16];
        // SAFETY: instruction handles of this block, valid in this callback.
        let (insn, va, size, len) = unsafe {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let len = qemu_plugin_insn_data(insn, bytes.as_mut_ptr() as *mut c_void, bytes.len());
            (insn, qemu_plugin_insn_vaddr(insn), qemu_plugin_insn_size(insn), len)
        };
        first.get_or_insert(va);
        let func = match cur {
            Some((s, e, f)) if (s..e).contains(&va) => f,
            _ => {
                let f = syms.locate(va);
                cur = syms
                    .is_function(f)
                    .then(|| (syms.start(f as usize), syms.end(f as usize), f));
                f
            }
        };
        let d = decode::classify(&bytes[..len]);
        let entry = syms.is_function(func) && syms.start(func as usize) == va;
        if entry && g.callers == Callers::Full {
            entries.push((insn, func));
        }
        let mut edge = None;
        if let (Some(b), true) = (d.branch, syms.is_function(func)) {
            let target = va.wrapping_add(size as u64).wrapping_add(b.rel as u64);
            if let Some(to) = syms.function(target) {
                if syms.start(to) == target {
                    edge = Some((func, to as u32));
                }
            }
        }
        if d.cpuid {
            cpuids.push((insn, i));
        }
        infos.push(InsnInfo {
            func,
            va,
            lock: d.lock,
            pause: d.pause,
            entry,
            edge,
        });
    }
    let comp = comp_of(&infos);
    let mut st = g.st.lock().unwrap_or_else(|e| e.into_inner());
    st.blocks += 1;
    let counter = st.counter(comp, g.counting, g.vcpus);
    // SAFETY: registering on this block's handles during its translation;
    // an own counter's address stays valid for the plugin's life.
    unsafe {
        match (counter, &g.sys) {
            (Counter::Own(p), Some(sys)) => {
                let kind = sys.kind(first.unwrap_or(0));
                let block = Box::leak(Box::new(syscalls::Block {
                    counter: p,
                    insns: n as u64,
                    kind,
                }));
                let flags = match kind {
                    _ if sys.whoami => qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                    Kind::Entry => qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                    _ => qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                };
                qemu_plugin_register_vcpu_tb_exec_cb(tb, Some(on_block_sys), flags, block as *mut _ as *mut c_void)
            }
            (Counter::Own(p), None) if g.cont.is_some() => {
                let block = Box::leak(Box::new(syscalls::Block {
                    counter: p,
                    insns: n as u64,
                    kind: Kind::Kernel,
                }));
                qemu_plugin_register_vcpu_tb_exec_cb(
                    tb,
                    Some(on_block_counted),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    block as *mut _ as *mut c_void,
                )
            }
            (Counter::Own(p), None) => qemu_plugin_register_vcpu_tb_exec_cb(
                tb,
                Some(on_block),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                p as *mut c_void,
            ),
            (Counter::Board(e), _) => {
                qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64, e, 1)
            }
        }
        for (insn, i) in cpuids {
            let tail = Tail {
                from: comp_of(&infos[i..]),
                after: comp_of(&infos[i + 1..]),
            };
            st.tails.push(tail);
            let udata = (st.tails.len() - 1) as *mut c_void;
            qemu_plugin_register_vcpu_insn_exec_cb(
                insn,
                Some(on_cpuid),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                udata,
            );
        }
        if let Some(c) = &g.cont {
            for (i, info) in infos.iter().enumerate() {
                let insn = qemu_plugin_tb_get_insn(tb, i);
                let kernel = info.va >= crate::symbols::KERNEL_HALF;
                if info.lock && kernel {
                    qemu_plugin_register_vcpu_mem_cb(
                        insn,
                        Some(on_rmw),
                        qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                        qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_W,
                        info.func as usize as *mut c_void,
                    );
                }
                if info.entry && c.watch.roles.contains_key(&info.func) {
                    qemu_plugin_register_vcpu_insn_exec_cb(
                        insn,
                        Some(on_lock_fn),
                        qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                        info.func as usize as *mut c_void,
                    );
                }
            }
        }
        for (insn, func) in entries {
            qemu_plugin_register_vcpu_insn_exec_cb(
                insn,
                Some(on_entry),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                func as usize as *mut c_void,
            );
        }
    }
}

/// A block was entered: add 1 to its slot's counter of this vCPU.
unsafe extern "C" fn on_block(vcpu: c_uint, udata: *mut c_void) {
    // SAFETY: udata is the slot's counter of vCPU 0 in a chunk of CHUNK
    // counters per vCPU, and vcpu < max_vcpus. Only this vCPU's thread
    // writes this counter.
    let c = unsafe { &*(udata as *const AtomicU64).add(vcpu as usize * CHUNK) };
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

unsafe extern "C" fn on_cpuid(_vcpu: c_uint, udata: *mut c_void) {
    let g = g();
    if g.all {
        return;
    }
    let Some(leaf) = read_reg(&g.rax).map(|v| v as u32) else {
        return;
    };
    if leaf != MARK_OPEN && leaf != MARK_CLOSE {
        return;
    }
    let mut st = g.st.lock().unwrap_or_else(|e| e.into_inner());
    let tail = st.tails[udata as usize].clone();
    let now = st.counters(g.vcpus);
    if leaf == MARK_OPEN {
        if st.window.open(now, &tail) {
            if g.each && g.callers == Callers::Full {
                st.dyn_base = dynamic(g);
            }
            if let Some(s) = &g.sys {
                s.windows().opened();
            }
            if let Some(c) = &g.cont {
                c.inner().st.opened();
            }
            g.open.store(true, Ordering::SeqCst);
        } else {
            eprintln!("harness-profiler: window opened twice; the second marker is ignored");
        }
    } else {
        let ops = read_reg(&g.rcx).unwrap_or(0);
        if st.window.close(&now, &tail, ops) {
            g.open.store(false, Ordering::SeqCst);
            if let Some(s) = &g.sys {
                s.windows().closed();
            }
            if let Some(c) = &g.cont {
                c.inner().st.closed(&g.syms, &c.data);
            }
            write(g, &st);
            if g.each {
                write_last(g, &st);
            }
        } else {
            eprintln!("harness-profiler: window closed while none was open; ignored");
        }
    }
}

unsafe extern "C" fn on_entry(vcpu: c_uint, udata: *mut c_void) {
    let g = g();
    if !g.open.load(Ordering::Relaxed) {
        return;
    }
    let callee = udata as usize as u32;
    let caller = read_reg(&g.rsp)
        .and_then(read_u64)
        .map(|ret| g.syms.locate(ret.wrapping_sub(1)))
        .unwrap_or(g.syms.slots() as u32); // "[?]": the stack was unreadable
    if let Some(m) = g.dynamic.get(vcpu as usize) {
        *m.lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((callee, caller))
            .or_insert(0) += 1;
    }
}

unsafe extern "C" fn on_exit(_id: qemu_plugin_id_t, _udata: *mut c_void) {
    let g = g();
    let mut st = g.st.lock().unwrap_or_else(|e| e.into_inner());
    if g.all {
        let now = st.counters(g.vcpus);
        st.window.close(&now, &Tail::default(), 0);
        if let Some(c) = &g.cont {
            c.inner().st.closed(&g.syms, &c.data);
        }
    }
    write(g, &st);
}

fn dynamic(g: &Global) -> HashMap<(u32, u32), u64> {
    let mut d: HashMap<(u32, u32), u64> = HashMap::new();
    for m in &g.dynamic {
        for (&k, &v) in m.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            *d.entry(k).or_insert(0) += v;
        }
    }
    d
}

fn header(g: &Global, st: &State) -> Header {
    Header {
        mode: if g.all { "all" } else { "marker" },
        windows: st.window.windows,
        unclosed: st.window.is_open(),
        ops: st.window.ops,
        ops_missing: st.window.ops_missing,
        callers: g.callers,
        top: g.top,
        vcpus: g.vcpus,
        blocks: st.blocks,
        counters: st.comps.len() as u64,
    }
}

/// Writes the profile of all closed windows to `out`.
fn write(g: &Global, st: &State) {
    let totals = st.window.totals(&st.comps, g.syms.slots());
    let mut text = render(&header(g, st), &totals, &g.syms, &dynamic(g));
    if let Some(s) = &g.sys {
        text += &s.windows().total.render();
    }
    if let Some(c) = &g.cont {
        text += &c.inner().st.total.render(&c.watch, g.top);
    }
    put(&g.out, seal(text));
}

/// Writes the last closed window alone to `out.N` (N = its number, from 1).
fn write_last(g: &Global, st: &State) {
    let totals = st.window.last_totals(&st.comps, g.syms.slots());
    let mut d = dynamic(g);
    for (k, v) in &st.dyn_base {
        if let Some(x) = d.get_mut(k) {
            *x -= v;
        }
    }
    d.retain(|_, v| *v > 0);
    let mut h = header(g, st);
    h.windows = 1;
    h.unclosed = false;
    h.ops = st.window.last_ops;
    h.ops_missing = (st.window.last_ops == 0) as u64;
    let mut path = g.out.clone().into_os_string();
    path.push(format!(".{}", st.window.windows));
    let mut text = render(&h, &totals, &g.syms, &d);
    if let Some(s) = &g.sys {
        text += &s.windows().last.render();
    }
    if let Some(c) = &g.cont {
        text += &c.inner().st.last.render(&c.watch, g.top);
    }
    put(&PathBuf::from(path), seal(text));
}

/// Writes a whole file under a temporary name, then renames it.
fn put(path: &PathBuf, text: String) {
    let mut tmp = path.clone().into_os_string();
    tmp.push(".tmp");
    let res = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = res {
        eprintln!("harness-profiler: write {}: {e}", path.display());
    }
}
