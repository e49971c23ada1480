//! Guests under QEMU: the command line as a pure function of a [`VmSpec`],
//! the kernel command line, the choice of accelerator (KVM only when a real
//! boot proves it works), console scanning for panics, oopses, BUGs, WARNs,
//! lockdep splats, soft lockups and stalls, and a guard that kills QEMU's
//! process group when dropped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::Clock;
use crate::proc::{Child, Cmd};

mod plugin;
pub use plugin::{find_profiler, Plugin, PROFILER_ENV, PROFILER_SO};

/// The accelerator a guest runs under.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// Software emulation, multi-threaded.
    Tcg,
}

/// The clock a number was measured in: the accelerator and the guest clock
/// together. Numbers of different clocks are never compared.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// Everything a guest boot depends on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VmSpec {
    /// QEMU binary.
    pub qemu: PathBuf,
    /// Accelerator.
    pub accel: Accel,
    /// Guest clock (icount only under TCG).
    pub clock: Clock,
    /// vCPUs.
    pub vcpus: u32,
    /// Sockets.
    pub sockets: u32,
    /// Threads per core.
    pub threads: u32,
    /// NUMA nodes (0: none).
    pub numa_nodes: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Kernel image (`bzImage`, or `vmlinux` for PVH).
    pub kernel: PathBuf,
    /// Initramfs.
    pub initrd: PathBuf,
    /// Kernel command line.
    pub cmdline: String,
    /// Console log file.
    pub console: PathBuf,
    /// Host port forwarded to the guest's port 22, bound to 127.0.0.1:
    /// 0 (QEMU picks) until [`Vm::start`] reads back the port QEMU bound.
    pub ssh_port: u16,
    /// The kernel profiler plugin (loaded under TCG only).
    #[serde(default)]
    pub plugin: Option<Plugin>,
}

/// More vCPUs than this need x2APIC with interrupt remapping.
pub const XAPIC_LIMIT: u32 = 255;

/// QEMU's argument vector for a spec.
pub fn qemu_args(s: &VmSpec) -> Vec<String> {
    let big = s.vcpus > XAPIC_LIMIT;
    let mut a: Vec<String> = Vec::new();
    let mut push = |x: &str| a.push(x.to_string());
    push("-nodefaults");
    push("-no-user-config");
    push("-display");
    push("none");
    push("-machine");
    push(if big { "q35,kernel-irqchip=split" } else { "q35" });
    push("-accel");
    push(match (s.accel, s.clock) {
        (Accel::Kvm, _) => "kvm",
        (Accel::Tcg, Clock::Wall) => "tcg,thread=multi",
        // icount needs one TCG thread that runs the vCPUs round-robin
        (Accel::Tcg, Clock::Icount) => "tcg",
    });
    if s.accel == Accel::Tcg && s.clock == Clock::Icount {
        push("-icount");
        push("shift=0,sleep=off");
    }
    push("-cpu");
    push(match (s.accel, big) {
        (Accel::Kvm, _) => "host",
        (Accel::Tcg, false) => "max",
        (Accel::Tcg, true) => "max,+x2apic",
    });
    let cores = s.vcpus / (s.sockets * s.threads).max(1);
    a.push("-smp".into());
    a.push(format!(
        "{},sockets={},cores={},threads={},maxcpus={}",
        s.vcpus,
        s.sockets,
        cores.max(1),
        s.threads,
        s.vcpus
    ));
    a.push("-m".into());
    a.push(format!("{}M", s.memory_mib));
    a.extend(numa_args(s));
    if big {
        a.push("-device".into());
        a.push("intel-iommu,intremap=on,eim=on".into());
    }
    a.push("-kernel".into());
    a.push(s.kernel.display().to_string());
    a.push("-initrd".into());
    a.push(s.initrd.display().to_string());
    a.push("-append".into());
    a.push(s.cmdline.clone());
    a.push("-serial".into());
    a.push(format!("file:{}", s.console.display()));
    a.push("-monitor".into());
    a.push("none".into());
    a.push("-no-reboot".into());
    a.push("-netdev".into());
    a.push(format!("user,id=net0,hostfwd=tcp:127.0.0.1:{}-:22", s.ssh_port));
    a.push("-device".into());
    a.push("virtio-net-pci,netdev=net0".into());
    if let (Accel::Tcg, Some(p)) = (s.accel, &s.plugin) {
        a.extend(["-plugin".to_string(), p.arg()]);
    }
    a
}

/// The NUMA nodes' memory backends and CPU ranges (none without nodes).
fn numa_args(s: &VmSpec) -> Vec<String> {
    let mut a = Vec::new();
    if s.numa_nodes > 0 {
        let per_mem = s.memory_mib / s.numa_nodes as u64;
        let per_cpu = s.vcpus / s.numa_nodes;
        for n in 0..s.numa_nodes {
            a.push("-object".into());
            a.push(format!("memory-backend-ram,id=mem{n},size={per_mem}M"));
            a.push("-numa".into());
            a.push(format!(
                "node,nodeid={n},cpus={}-{},memdev=mem{n}",
                n * per_cpu,
                (n + 1) * per_cpu - 1
            ));
        }
    }
    a
}

/// Inputs of the kernel command line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CmdlineSpec {
    /// Address-space randomisation on.
    pub aslr: bool,
    /// vCPUs per host CPU; above 1 under TCG the lockup detectors would fire
    /// on starved vCPUs, so they are turned off (and this is recorded).
    pub overcommit: f64,
    /// Accelerator.
    pub accel: Accel,
    /// Guest clock (icount only under TCG).
    pub clock: Clock,
    /// Extra words from the matrix.
    pub extra: Vec<String>,
}

/// The kernel command line. `lpj=` skips the per-CPU delay-loop calibration
/// (tens of seconds at high vCPU counts under TCG); `quiet loglevel=5` keeps
/// the serial console fast while WARN and worse still reach it.
pub fn kernel_cmdline(c: &CmdlineSpec) -> String {
    let mut w: Vec<String> = [
        "console=ttyS0",
        "panic=-1",
        "oops=panic",
        "quiet",
        "loglevel=5",
        "lpj=4000000",
        "tsc=reliable",
        "rdinit=/init",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !c.aslr {
        w.push("norandmaps".into());
    }
    if c.accel == Accel::Tcg {
        // QEMU's TCG CPU reports an old AMD family, for which Linux waits
        // 10 ms of busy delay per CPU it starts; and the PM timer check is a
        // polling loop. Both are busy waits that cost guest time (minutes of
        // wall time under icount, where every PAUSE leaves the TB loop).
        w.push("cpu_init_udelay=0".into());
        w.push("acpi_pm_good".into());
    }
    if c.accel == Accel::Tcg && c.clock == Clock::Icount {
        // The local APIC timer's calibration is a 100 ms rdtsc+PAUSE loop on
        // the boot CPU: every PAUSE ends a TB and goes round all vCPUs, 10 s
        // of wall time at 2 vCPUs and over 100 s at 26. TCG's APIC has no
        // TSC-deadline mode and QEMU reports no crystal clock (CPUID 0x15),
        // so Linux cannot skip it: ticks come from the HPET broadcast instead.
        w.push("nolapic_timer".into());
    }
    if c.accel == Accel::Tcg && c.overcommit > 1.0 {
        for x in [
            "nowatchdog",
            "nosoftlockup",
            "rcupdate.rcu_cpu_stall_suppress=1",
            "hung_task_timeout_secs=0",
        ] {
            w.push(x.into());
        }
        if c.clock == Clock::Wall {
            // Parallel CPU bring-up starts every AP at once, and each spins
            // (PAUSE) until the boot CPU releases it: hundreds of vCPU threads
            // spinning on a few host cores starve the one doing the work. One
            // AP at a time leaves the others halted. 448 vCPUs on 2 cores
            // reached SSH in 128 s instead of 419 s
            // (docs/measurements/2026-12-02-scale-serial-bringup.md). Not
            // under icount: there vCPUs take turns on one thread and the boot
            // was no faster (26 vCPUs: 9.5-9.7 s without, 10.0-10.6 s with).
            w.push("cpuhp.parallel=0".into());
        }
    }
    w.extend(c.extra.iter().cloned());
    w.join(" ")
}

/// Kinds of trouble a console can show.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// Kind.
    pub kind: Trouble,
    /// The console line that announced it.
    pub line: String,
    /// `kind: function` when a call trace followed.
    pub signature: String,
}

fn classify_line(l: &str) -> Option<Trouble> {
    if l.contains("Kernel panic - not syncing") {
        Some(Trouble::Panic)
    } else if l.contains("possible circular locking dependency")
        || l.contains("possible recursive locking detected")
        || l.contains("inconsistent lock state")
        || l.contains("suspicious RCU usage")
        || l.contains("bad unlock balance detected")
    {
        Some(Trouble::Lockdep)
    } else if l.contains("BUG: soft lockup") {
        Some(Trouble::SoftLockup)
    } else if l.contains("rcu_sched detected stall")
        || l.contains("rcu_preempt detected stall")
        || l.contains("detected stalls on CPUs")
    {
        Some(Trouble::RcuStall)
    } else if l.contains("blocked for more than") && l.contains("INFO: task") {
        Some(Trouble::HungTask)
    } else if l.contains("Oops:") || l.contains("general protection fault") {
        Some(Trouble::Oops)
    } else if l.contains("BUG:") || l.contains("kernel BUG at") {
        Some(Trouble::Bug)
    } else if l.contains("WARNING:") && (l.contains(" at ") || l.contains("CPU:")) {
        Some(Trouble::Warn)
    } else {
        None
    }
}

/// First function of a call trace line such as ` do_thing+0x12/0x40`.
fn trace_function(l: &str) -> Option<String> {
    let t = l.split(']').next_back().unwrap_or(l).trim();
    if t.starts_with('?') || t.starts_with('<') || t.is_empty() {
        return None;
    }
    let f = t.split_whitespace().next()?;
    let (name, off) = f.split_once('+')?;
    (off.starts_with("0x") && !name.is_empty()).then(|| name.to_string())
}

/// Scans console text for trouble. Each finding gets the first function of
/// the call trace that follows it (within 60 lines), if any.
pub fn scan_console(text: &str) -> Vec<Finding> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<Finding> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(kind) = classify_line(l) else { continue };
        // "WARNING: CPU: 1 PID: 9 at mm/x.c:10 func+0x9/0x20" names it itself
        let mut func = if kind == Trouble::Warn {
            l.split_whitespace().find_map(trace_function)
        } else {
            None
        };
        let mut in_trace = false;
        for m in lines.iter().skip(i + 1).take(if func.is_some() { 0 } else { 60 }) {
            if m.contains("Call Trace:") {
                in_trace = true;
                continue;
            }
            if in_trace {
                if let Some(f) = trace_function(m) {
                    func = Some(f);
                    break;
                }
            }
        }
        // a RIP line names the faulting function even without a trace
        if func.is_none() {
            func = lines.iter().skip(i).take(20).find_map(|m| {
                m.split("RIP: 0010:")
                    .nth(1)
                    .and_then(|r| r.split('+').next())
                    .map(|s| s.trim().to_string())
            });
        }
        let kname = serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let signature = match &func {
            Some(f) => format!("{kname}: {f}"),
            None => kname,
        };
        let line = l.split(']').skip(1).collect::<Vec<_>>().join("]").trim().to_string();
        let line = if line.is_empty() { l.trim().to_string() } else { line };
        if !out.iter().any(|f| f.signature == signature && f.kind == kind) {
            out.push(Finding { kind, line, signature });
        }
    }
    out
}

/// The port a process listens on at 127.0.0.1: its own sockets (the
/// `socket:[inode]` links under `/proc/<pid>/fd`) matched against the
/// listening TCP sockets of its network namespace.
pub fn listening_port(pid: i32) -> Option<u16> {
    let mut inodes = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        let t = std::fs::read_link(e.path()).ok()?;
        if let Some(n) = t
            .to_str()
            .and_then(|t| t.strip_prefix("socket:[")?.strip_suffix(']')?.parse::<u64>().ok())
        {
            inodes.insert(n);
        }
    }
    let tcp = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?;
    tcp.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (addr, port) = f.get(1)?.split_once(':')?;
        let inode: u64 = f.get(9)?.parse().ok()?;
        (addr == "0100007F" && f.get(3) == Some(&"0A") && inodes.contains(&inode))
            .then(|| u16::from_str_radix(port, 16).ok())?
    })
}

/// How long QEMU may take to bind its SSH forward after it starts.
const FORWARD_DEADLINE: Duration = Duration::from_secs(60);

/// Whether a guest's QEMU has exited, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It still runs.
    Running,
    /// It exited with this status.
    Code(i32),
    /// It died from this signal.
    Signal(i32),
}

/// A running guest; dropping it kills QEMU.
pub struct Vm {
    /// The spec it was started with.
    pub spec: VmSpec,
    child: Child,
}

impl Vm {
    /// Starts QEMU (its stdout/stderr go to `log`) with the SSH forward on
    /// port 0, so QEMU binds a port the kernel picks and owns it from the
    /// first moment, and reads that port back into `spec.ssh_port`. It stays
    /// 0 if QEMU exited or bound nothing within a minute.
    pub fn start(mut spec: VmSpec, log: &Path) -> Result<Vm> {
        let _ = std::fs::remove_file(&spec.console);
        spec.ssh_port = 0;
        let child = Cmd::new(&spec.qemu)
            .args(qemu_args(&spec))
            .log(log)
            .spawn()
            .context("start QEMU")?;
        let mut vm = Vm { spec, child };
        let until = std::time::Instant::now() + FORWARD_DEADLINE;
        while std::time::Instant::now() < until && matches!(vm.child.try_status(), Ok(None)) {
            crate::proc::check_interrupted()?;
            if let Some(p) = listening_port(vm.child.pgid()) {
                vm.spec.ssh_port = p;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(vm)
    }

    /// Whether QEMU has exited, and how.
    pub fn exited(&mut self) -> Result<Exit> {
        match self.child.try_status()? {
            None => Ok(Exit::Running),
            Some(Some(code)) => Ok(Exit::Code(code)),
            Some(None) => self
                .child
                .signal()
                .map(Exit::Signal)
                .context("read the signal QEMU died from"),
        }
    }

    /// The console so far (at most [`MAX_CONSOLE`] of it: [`read_console`]).
    pub fn console(&self) -> String {
        read_console(&self.spec.console, MAX_CONSOLE)
    }

    /// Waits up to `grace` for QEMU to exit by itself, then kills it.
    pub fn finish(mut self, grace: Duration) {
        let until = std::time::Instant::now() + grace;
        while std::time::Instant::now() < until {
            if matches!(self.child.try_status(), Ok(Some(_)) | Err(_)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.child.kill();
    }
}

/// The q35 vCPU limit of a QEMU version.
pub fn q35_max_cpus(major: u32, minor: u32) -> u32 {
    match (major, minor) {
        (0..=7, _) => 288,
        (8, 0) => 288,
        (8, _) => 1024,
        _ => 4096,
    }
}

/// `(major, minor)` from `qemu-system-x86_64 --version`.
pub fn parse_qemu_version(out: &str) -> Option<(u32, u32)> {
    let v = out.split("version ").nth(1)?.split_whitespace().next()?;
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Why KVM cannot be used without booting, or None if a boot should decide.
pub fn kvm_precheck() -> Option<String> {
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Ok(_) => None,
        Err(e) => Some(format!("/dev/kvm is not usable ({e})")),
    }
}

/// How long a firmware-only KVM guest must live to count as working.
const FIRMWARE_PROBE: Duration = Duration::from_secs(2);

/// QEMU's arguments for a firmware-only guest under KVM: the machine and
/// CPU model the boots use, one vCPU, no kernel, no devices.
pub fn firmware_probe_args() -> Vec<String> {
    let a = [
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-machine",
        "q35",
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-smp",
        "1",
        "-m",
        "64M",
        "-serial",
        "none",
        "-monitor",
        "none",
        "-no-reboot",
    ];
    a.iter().map(|s| s.to_string()).collect()
}

/// Whether KVM runs guest code here, without a kernel: QEMU starts a
/// firmware-only guest with the boots' machine and CPU model and must keep
/// it running for 2 s (SeaBIOS then idles with no boot device). Gives why
/// not: QEMU's own words when it exits early (a vCPU that KVM refuses,
/// such as an MSR it cannot set, fails within milliseconds). The log gets
/// QEMU's output.
pub fn probe_kvm_firmware(qemu: &Path, log: &Path) -> Result<Option<String>> {
    let f = Cmd::new(qemu)
        .args(firmware_probe_args())
        .log(log)
        .capture()
        .deadline(FIRMWARE_PROBE)
        .run()?;
    if f.timed_out {
        return Ok(None);
    }
    let last = f
        .output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .trim();
    let how = f
        .code
        .map(|c| format!("exited with {c}"))
        .unwrap_or_else(|| "was killed by a signal".into());
    Ok(Some(format!("a firmware-only KVM guest {how} at once: {last}")))
}

/// The host KVM's vCPU limit (KVM_CAP_MAX_VCPUS), if KVM opens.
pub fn kvm_max_vcpus() -> Option<u32> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .ok()?;
    const KVM_CHECK_EXTENSION: libc::c_ulong = 0xAE03;
    const KVM_CAP_MAX_VCPUS: libc::c_int = 66;
    // SAFETY: a read-only capability query on an open /dev/kvm descriptor.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS) };
    (r > 0).then_some(r as u32)
}

/// The most of a console the harness reads into memory: 64 MiB.
pub const MAX_CONSOLE: u64 = 64 << 20;

/// The console file at `path`, read lossily (one invalid byte loses
/// nothing else), and at most `limit` bytes of it: a longer console (a
/// flooding guest) is read as its head, a line saying how much was left
/// out, and its last sixteenth of `limit`, where a final panic would be.
/// Empty when it cannot be read.
pub fn read_console(path: &Path, limit: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if len <= limit {
        let mut all = Vec::new();
        return f.read_to_end(&mut all).map(|_| lossy(&all)).unwrap_or_default();
    }
    let tail = limit / 16;
    let mut head = Vec::new();
    let _ = f.by_ref().take(limit - tail).read_to_end(&mut head);
    let mut end = Vec::new();
    if f.seek(SeekFrom::Start(len - tail)).is_ok() {
        let _ = f.take(tail).read_to_end(&mut end);
    }
    // the tail from its first whole line
    let from = end.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1);
    let left_out = len - head.len() as u64 - (end.len() - from) as u64;
    format!(
        "{}\n[console over limit: {left_out} bytes of {len} not read]\n{}",
        lossy(&head),
        lossy(&end[from..])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(vcpus: u32, accel: Accel) -> VmSpec {
        VmSpec {
            qemu: "qemu-system-x86_64".into(),
            accel,
            clock: Clock::Wall,
            vcpus,
            sockets: 1,
            threads: 1,
            numa_nodes: 0,
            memory_mib: 2048,
            kernel: "/k/bzImage".into(),
            initrd: "/k/initrd".into(),
            cmdline: "console=ttyS0".into(),
            console: "/r/console.log".into(),
            ssh_port: 40022,
            plugin: None,
        }
    }

    #[test]
    fn the_profiler_plugin_is_loaded_under_tcg_only() {
        let p = Plugin {
            so: "/t/p.so".into(),
            symbols: "/k/vmlinux.syms".into(),
            out: "/r/profiles/b.profile".into(),
        };
        // (accel, clock, expected -plugin value)
        let cases = [
            (
                Accel::Tcg,
                Clock::Icount,
                Some("/t/p.so,symbols=/k/vmlinux.syms,out=/r/profiles/b.profile,each=on,syscalls=on"),
            ),
            (
                Accel::Tcg,
                Clock::Wall,
                Some("/t/p.so,symbols=/k/vmlinux.syms,out=/r/profiles/b.profile,each=on,syscalls=on"),
            ),
            (Accel::Kvm, Clock::Wall, None),
        ];
        for (accel, clock, want) in cases {
            let mut s = spec(2, accel);
            s.clock = clock;
            assert!(!qemu_args(&s).contains(&"-plugin".to_string()), "no plugin asked");
            s.plugin = Some(p.clone());
            let a = qemu_args(&s);
            let got = a.iter().position(|x| x == "-plugin").map(|i| a[i + 1].as_str());
            assert_eq!(got, want, "{accel:?} {clock:?}");
        }
    }

    #[test]
    fn small_tcg_guest_args() {
        assert_eq!(
            qemu_args(&spec(4, Accel::Tcg)).join(" "),
            "-nodefaults -no-user-config -display none -machine q35 -accel tcg,thread=multi -cpu max \
             -smp 4,sockets=1,cores=4,threads=1,maxcpus=4 -m 2048M -kernel /k/bzImage -initrd /k/initrd \
             -append console=ttyS0 -serial file:/r/console.log -monitor none -no-reboot \
             -netdev user,id=net0,hostfwd=tcp:127.0.0.1:40022-:22 -device virtio-net-pci,netdev=net0"
        );
    }

    #[test]
    fn icount_guest_runs_single_threaded_tcg_with_instruction_counting() {
        let mut s = spec(2, Accel::Tcg);
        s.clock = Clock::Icount;
        let a = qemu_args(&s).join(" ");
        assert!(a.contains("-accel tcg -icount shift=0,sleep=off -cpu max "), "{a}");
        assert!(!a.contains("thread=multi"), "{a}");
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
    fn large_guests_get_split_irqchip_iommu_and_x2apic() {
        for (accel, cpu) in [(Accel::Tcg, "max,+x2apic"), (Accel::Kvm, "host")] {
            let a = qemu_args(&spec(448, accel)).join(" ");
            assert!(a.contains("-machine q35,kernel-irqchip=split"), "{a}");
            assert!(a.contains("-device intel-iommu,intremap=on,eim=on"), "{a}");
            assert!(a.contains(&format!("-cpu {cpu} ")), "{a}");
        }
        let a = qemu_args(&spec(255, Accel::Tcg)).join(" ");
        assert!(!a.contains("intel-iommu"));
    }

    #[test]
    fn topology_and_numa() {
        let mut s = spec(256, Accel::Kvm);
        s.sockets = 2;
        s.threads = 2;
        s.numa_nodes = 2;
        let a = qemu_args(&s).join(" ");
        assert!(a.contains("-smp 256,sockets=2,cores=64,threads=2,maxcpus=256"), "{a}");
        assert!(a.contains("-numa node,nodeid=1,cpus=128-255,memdev=mem1"), "{a}");
        assert!(a.contains("memory-backend-ram,id=mem0,size=1024M"), "{a}");
    }

    #[test]
    fn cmdline_table() {
        let base = "console=ttyS0 panic=-1 oops=panic quiet loglevel=5 lpj=4000000 tsc=reliable rdinit=/init";
        let (wall, icount) = (Clock::Wall, Clock::Icount);
        let cases = [
            (true, 0.5, Accel::Tcg, wall, vec![], format!("{base} cpu_init_udelay=0 acpi_pm_good")),
            (true, 0.5, Accel::Tcg, icount, vec![], format!("{base} cpu_init_udelay=0 acpi_pm_good nolapic_timer")),
            (false, 0.5, Accel::Kvm, wall, vec!["foo=1".to_string()], format!("{base} norandmaps foo=1")),
            (
                true,
                13.0,
                Accel::Tcg,
                wall,
                vec![],
                format!("{base} cpu_init_udelay=0 acpi_pm_good nowatchdog nosoftlockup rcupdate.rcu_cpu_stall_suppress=1 hung_task_timeout_secs=0 cpuhp.parallel=0"),
            ),
            (
                true,
                26.0,
                Accel::Tcg,
                icount,
                vec![],
                format!("{base} cpu_init_udelay=0 acpi_pm_good nolapic_timer nowatchdog nosoftlockup rcupdate.rcu_cpu_stall_suppress=1 hung_task_timeout_secs=0"),
            ),
            (true, 13.0, Accel::Kvm, wall, vec![], base.to_string()),
        ];
        for (aslr, overcommit, accel, clock, extra, want) in cases {
            assert_eq!(
                kernel_cmdline(&CmdlineSpec {
                    aslr,
                    overcommit,
                    accel,
                    clock,
                    extra
                }),
                want
            );
        }
    }

    #[test]
    fn console_scan_finds_kinds_and_signatures() {
        let text = "[    1.0] Run /init as init process\n\
            [    2.1] kernel BUG at kernel/harness_test.c:10!\n\
            [    2.1] Oops: invalid opcode: 0000 [#1] SMP\n\
            [    2.1] RIP: 0010:harness_boom+0x5/0x10\n\
            [    2.1] Call Trace:\n\
            [    2.1]  <TASK>\n\
            [    2.1]  ? die+0x36/0x90\n\
            [    2.1]  harness_boom+0x5/0x10\n\
            [    2.1]  do_one_initcall+0x41/0x200\n\
            [    2.2] Kernel panic - not syncing: Fatal exception\n\
            [    3.0] WARNING: CPU: 1 PID: 9 at mm/vmalloc.c:100 free_vmap_area_noflush+0x9/0x20\n";
        let f = scan_console(text);
        let sigs: Vec<&str> = f.iter().map(|x| x.signature.as_str()).collect();
        assert_eq!(
            sigs,
            vec![
                "bug: harness_boom",
                "oops: harness_boom",
                "panic",
                "warn: free_vmap_area_noflush"
            ]
        );
        assert!(scan_console("[ 1.0] all fine\n[ 2.0] random: crng init done\n").is_empty());
    }

    #[test]
    fn qemu_version_limits() {
        assert_eq!(
            parse_qemu_version("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2)"),
            Some((10, 0))
        );
        assert_eq!(
            parse_qemu_version("QEMU emulator version 7.2.15 (Debian)"),
            Some((7, 2))
        );
        assert_eq!(q35_max_cpus(7, 2), 288);
        assert_eq!(q35_max_cpus(10, 0), 4096);
    }

    #[test]
    fn a_flooding_console_is_read_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("console.log");
        let mut text = b"[    0.1] Linux version 6.12\n\xff odd byte\n".to_vec();
        text.extend(std::iter::repeat_n(b"flood flood flood\n".to_vec(), 10_000).flatten());
        text.extend(b"[  900.0] Kernel panic - not syncing: Fatal exception\n");
        std::fs::write(&p, &text).unwrap();
        let got = read_console(&p, 16 << 10);
        assert!(got.len() < (16 << 10) + 200, "{}", got.len());
        assert!(
            got.starts_with("[    0.1] Linux version 6.12\n\u{fffd} odd byte\n"),
            "lossy, from the start"
        );
        assert!(
            got.contains("console over limit:") && got.ends_with("Kernel panic - not syncing: Fatal exception\n"),
            "{}",
            &got[got.len() - 200..]
        );
        assert_eq!(scan_console(&got).len(), 1, "the panic at the end is still found");
        assert_eq!(
            read_console(&p, 1 << 30).len(),
            String::from_utf8_lossy(&text).len(),
            "a console under the limit is read whole"
        );
        assert_eq!(read_console(&dir.path().join("none"), 10), "");
    }
}
