//! Guests under QEMU: the command line as a pure function of a [`VmSpec`],
//! the kernel command line, the choice of accelerator (KVM only when a real
//! boot proves it works), and a guard that kills QEMU's process group when
//! dropped; `vm/console.rs` reads and scans the console, `vm/pin.rs` pins
//! vCPU threads over QMP (`vm/qmp.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::Clock;
use crate::host::topology::Placement;
use crate::proc::{Child, Cmd};

mod console;
pub mod pin;
mod plugin;
mod qmp;
pub use console::{read_console, scan_console, Finding, Trouble, MAX_CONSOLE};
pub use plugin::{find_profiler, Plugin, PROFILER_ENV, PROFILER_SO};

pub use crate::vocab::Accel;

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
    /// Where the vCPU threads run and each guest node's memory is bound
    /// (none: the host scheduler decides): [`pin::plan`].
    #[serde(default)]
    pub placement: Option<Placement>,
    /// Guest memory on hugetlbfs huge pages ([`HUGETLBFS`]).
    #[serde(default)]
    pub hugepages: bool,
    /// QEMU's QMP socket, which [`Vm::start`] asks for the vCPU threads
    /// when the guest is pinned.
    #[serde(default)]
    pub qmp: Option<PathBuf>,
}

/// Where hugetlbfs is mounted for `guest.hugepages`.
pub const HUGETLBFS: &str = "/dev/hugepages";

/// More vCPUs than this need x2APIC with interrupt remapping.
pub const XAPIC_LIMIT: u32 = 255;

/// QEMU's argument vector for a spec.
pub fn qemu_args(s: &VmSpec) -> Vec<String> {
    let big = s.vcpus > XAPIC_LIMIT;
    let mut machine = if big { "q35,kernel-irqchip=split" } else { "q35" }.to_string();
    if s.hugepages && s.numa_nodes == 0 {
        machine.push_str(",memory-backend=ram0");
    }
    let accel = match (s.accel, s.clock) {
        (Accel::Kvm, _) => "kvm",
        (Accel::Tcg, Clock::Wall) => "tcg,thread=multi",
        // icount needs one TCG thread that runs the vCPUs round-robin
        (Accel::Tcg, Clock::Icount) => "tcg",
    };
    let mut a = words(&[
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-machine",
        &machine,
    ]);
    a.extend(words(&["-accel", accel]));
    if s.accel == Accel::Tcg && s.clock == Clock::Icount {
        a.extend(words(&["-icount", "shift=0,sleep=off"]));
    }
    let cpu = match (s.accel, big) {
        (Accel::Kvm, _) => "host",
        (Accel::Tcg, false) => "max",
        (Accel::Tcg, true) => "max,+x2apic",
    };
    let cores = (s.vcpus / (s.sockets * s.threads).max(1)).max(1);
    let (v, so, th) = (s.vcpus, s.sockets, s.threads);
    a.extend(words(&["-cpu", cpu, "-smp"]));
    a.push(format!("{v},sockets={so},cores={cores},threads={th},maxcpus={v}"));
    a.extend(["-m".to_string(), format!("{}M", s.memory_mib)]);
    a.extend(memory_args(s));
    if big {
        a.extend(words(&["-device", "intel-iommu,intremap=on,eim=on"]));
    }
    let (kernel, initrd) = (s.kernel.display().to_string(), s.initrd.display().to_string());
    a.extend(words(&[
        "-kernel", &kernel, "-initrd", &initrd, "-append", &s.cmdline, "-serial",
    ]));
    a.push(format!("file:{}", s.console.display()));
    a.extend(words(&["-monitor", "none"]));
    if let Some(q) = &s.qmp {
        a.extend(["-qmp".to_string(), format!("unix:{},server=on,wait=off", q.display())]);
    }
    a.extend(words(&["-no-reboot", "-netdev"]));
    a.push(format!("user,id=net0,hostfwd=tcp:127.0.0.1:{}-:22", s.ssh_port));
    a.extend(words(&["-device", "virtio-net-pci,netdev=net0"]));
    if let (Accel::Tcg, Some(p)) = (s.accel, &s.plugin) {
        a.extend(["-plugin".to_string(), p.arg()]);
    }
    a
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|x| x.to_string()).collect()
}

/// The memory backends: one per NUMA node with its CPU range, bound to its
/// host node when the placement says one (`policy=bind`), on hugetlbfs
/// with `hugepages`; without nodes, one hugetlbfs backend for the whole
/// memory (`-machine …,memory-backend=ram0`) or none.
fn memory_args(s: &VmSpec) -> Vec<String> {
    let kind = |id: &str, size: u64| match s.hugepages {
        true => format!("memory-backend-file,id={id},size={size}M,mem-path={HUGETLBFS}"),
        false => format!("memory-backend-ram,id={id},size={size}M"),
    };
    if s.numa_nodes == 0 {
        return match s.hugepages {
            true => vec!["-object".into(), kind("ram0", s.memory_mib)],
            false => Vec::new(),
        };
    }
    let per_mem = s.memory_mib / s.numa_nodes as u64;
    let per_cpu = s.vcpus / s.numa_nodes;
    let mut a = Vec::new();
    for n in 0..s.numa_nodes {
        let mut backend = kind(&format!("mem{n}"), per_mem);
        let host = s.placement.as_ref().and_then(|p| p.guest_nodes.get(n as usize));
        if let Some(h) = host {
            backend.push_str(&format!(",host-nodes={h},policy=bind"));
        }
        let (lo, hi) = (n * per_cpu, (n + 1) * per_cpu - 1);
        a.extend(["-object".into(), backend, "-numa".into()]);
        a.push(format!("node,nodeid={n},cpus={lo}-{hi},memdev=mem{n}"));
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
    /// What pinning did, when the spec has a placement.
    pinned: Option<pin::Pinned>,
}

impl Vm {
    /// Starts QEMU (its stdout/stderr go to `log`) with the SSH forward on
    /// port 0, so QEMU binds a port the kernel picks and owns it from the
    /// first moment, and reads that port back into `spec.ssh_port`. It stays
    /// 0 if QEMU exited or bound nothing within a minute.
    pub fn start(mut spec: VmSpec, log: &Path) -> Result<Vm> {
        let _ = std::fs::remove_file(&spec.console);
        let _ = std::fs::remove_file(pin::record_path(&spec.console));
        spec.ssh_port = 0;
        let pinned = spec.placement.as_ref().is_some_and(Placement::pinned);
        spec.qmp = pinned.then(pin::socket_path);
        let child = Cmd::new(&spec.qemu)
            .args(qemu_args(&spec))
            .log(log)
            .spawn()
            .context("start QEMU")?;
        let mut vm = Vm {
            spec,
            child,
            pinned: None,
        };
        let until = std::time::Instant::now() + FORWARD_DEADLINE;
        if let Some(p) = vm.spec.placement.clone() {
            vm.pin(p, until);
        }
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

    /// Pins the vCPU threads as `p` says (when it pins any) and writes what
    /// was done beside the console; a failure leaves the guest unpinned,
    /// said there, and the boot goes on.
    fn pin(&mut self, p: Placement, until: std::time::Instant) {
        let mut done = pin::Pinned {
            placement: p.clone(),
            vcpu_threads: Vec::new(),
            other_threads: Vec::new(),
            late_threads: Vec::new(),
            error: None,
        };
        if let Some(qmp) = self.spec.qmp.clone() {
            let child = &mut self.child;
            match pin::apply(child.pgid(), &qmp, &p, until, || matches!(child.try_status(), Ok(None))) {
                Ok(d) => done = d,
                Err(e) => done.error = Some(format!("{e:#}")),
            }
            let _ = std::fs::remove_file(&qmp);
        }
        self.pinned = Some(done);
        self.write_pinned();
    }

    /// Puts QEMU's threads started since it was pinned on the CPUs of its
    /// other threads ([`pin::repin`]), and writes them into `pin.json`.
    /// Nothing when the guest is not pinned.
    pub fn repin(&mut self) {
        let pid = self.child.pgid();
        let Some(p) = self
            .pinned
            .as_mut()
            .filter(|p| p.error.is_none() && p.placement.pinned())
        else {
            return;
        };
        if pin::repin(pid, p) {
            self.write_pinned();
        }
    }

    /// `pin.json` beside the console: what pinning did.
    fn write_pinned(&self) {
        let json = serde_json::to_string_pretty(&self.pinned).unwrap_or_default();
        let _ = std::fs::write(pin::record_path(&self.spec.console), json + "\n");
    }

    /// QEMU's process id.
    pub fn pid(&self) -> i32 {
        self.child.pgid()
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
            placement: None,
            hugepages: false,
            qmp: None,
        }
    }

    #[test]
    fn the_profiler_plugin_is_loaded_under_tcg_only() {
        let p = Plugin {
            so: "/t/p.so".into(),
            symbols: "/k/vmlinux.syms".into(),
            out: "/r/profiles/b.profile".into(),
            syscalls: true,
            data: None,
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
    fn a_placed_guest_binds_node_memory_and_has_a_qmp_socket() {
        let mut s = spec(4, Accel::Kvm);
        s.numa_nodes = 2;
        s.placement = Some(Placement {
            pin: crate::config::Pin::Cores,
            vcpu_cpus: vec![0, 1, 64, 65],
            guest_nodes: vec![0, 1],
            others: vec![2],
            overcommitted: false,
            note: None,
        });
        s.qmp = Some("/tmp/q.sock".into());
        let a = qemu_args(&s).join(" ");
        assert!(
            a.contains(
                "-object memory-backend-ram,id=mem1,size=1024M,host-nodes=1,policy=bind -numa node,nodeid=1,cpus=2-3"
            ),
            "{a}"
        );
        assert!(
            a.contains("-monitor none -qmp unix:/tmp/q.sock,server=on,wait=off -no-reboot"),
            "{a}"
        );
        s.hugepages = true;
        let a = qemu_args(&s).join(" ");
        assert!(
            a.contains("memory-backend-file,id=mem0,size=1024M,mem-path=/dev/hugepages,host-nodes=0,policy=bind"),
            "{a}"
        );
        s.numa_nodes = 0;
        let a = qemu_args(&s).join(" ");
        assert!(a.contains("-machine q35,memory-backend=ram0 "), "{a}");
        assert!(
            a.contains("-m 2048M -object memory-backend-file,id=ram0,size=2048M,mem-path=/dev/hugepages -kernel"),
            "{a}"
        );
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
}
