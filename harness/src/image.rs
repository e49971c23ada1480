//! The guest image: an initramfs (newc cpio, written here, uncompressed) made
//! of Debian's busybox-static and dropbear-bin with the shared libraries they
//! and the dynamic benchmarks need, the benchmark programs compiled on the
//! host from `images/*.c`, an `/init` that brings up the network and SSH,
//! and the run's public key. Kernel modules go in a second archive per
//! kernel, concatenated after the common one (the kernel unpacks both).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::proc::Cmd;

pub(crate) mod pins;
mod programs;
pub use pins::{changes as pins_changes, image_parts, ImageParts};
pub use programs::{program_files, GuestFile};

/// One archive member.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file with mode bits and contents.
    File(u32, Vec<u8>),
    /// A symlink to a target.
    Link(String),
}

/// An initramfs under construction: absolute guest path → entry.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    /// Adds a directory and its parents.
    pub fn dir(&mut self, path: &str) {
        let mut cur = String::new();
        for part in path.trim_matches('/').split('/').filter(|p| !p.is_empty()) {
            cur.push('/');
            cur.push_str(part);
            self.entries.entry(cur.clone()).or_insert(Entry::Dir);
        }
    }
    fn parent(&mut self, path: &str) {
        if let Some((p, _)) = path.rsplit_once('/') {
            if !p.is_empty() {
                self.dir(p);
            }
        }
    }
    /// Adds a file.
    pub fn file(&mut self, path: &str, mode: u32, data: Vec<u8>) {
        self.parent(path);
        self.entries.insert(path.to_string(), Entry::File(mode, data));
    }
    /// Adds a host file, keeping its permission bits.
    pub fn host_file(&mut self, path: &str, host: &Path) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let data = std::fs::read(host).with_context(|| format!("read {}", host.display()))?;
        let mode = std::fs::metadata(host)
            .with_context(|| format!("stat {}", host.display()))?
            .permissions()
            .mode()
            & 0o7777;
        self.file(path, mode, data);
        Ok(())
    }
    /// Adds a symlink.
    pub fn link(&mut self, path: &str, target: &str) {
        self.parent(path);
        self.entries.insert(path.to_string(), Entry::Link(target.to_string()));
    }
    /// Does the archive have this path?
    pub fn has(&self, path: &str) -> bool {
        self.entries.contains_key(path)
    }

    /// Serialises as a newc cpio archive with a trailer.
    pub fn to_cpio(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (ino, (path, e)) in (1u32..).zip(&self.entries) {
            let name = path.trim_start_matches('/');
            let (mode, data): (u32, &[u8]) = match e {
                Entry::Dir => (0o040755, &[]),
                Entry::File(m, d) => (0o100000 | m, d),
                Entry::Link(t) => (0o120777, t.as_bytes()),
            };
            header(
                &mut out,
                ino,
                mode,
                if matches!(e, Entry::Dir) { 2 } else { 1 },
                data.len(),
                name,
            );
            out.extend_from_slice(data);
            pad4(&mut out);
        }
        header(&mut out, 0, 0, 1, 0, "TRAILER!!!");
        out
    }
}

fn header(out: &mut Vec<u8>, ino: u32, mode: u32, nlink: u32, size: usize, name: &str) {
    let fields = [
        ino,
        mode,
        0,
        0,
        nlink,
        0,
        size as u32,
        0,
        0,
        0,
        0,
        name.len() as u32 + 1,
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// Guest's static address and QEMU user-net gateway.
pub const GUEST_IP: &str = "10.0.2.15";
/// Line `/init` prints on the console when sshd is up.
pub const READY_MARK: &str = "harness: guest ready";
/// Prefix of the guest-time marks `/init` prints on the console
/// (`harness: uptime <seconds> <idle>`), so the host can read guest time
/// while the guest boots.
pub const UPTIME_MARK: &str = "harness: uptime ";

/// The guest's `/init`. It takes no value from the matrix: what varies
/// (ASLR, watchdogs) goes on the kernel command line.
pub fn init_script() -> String {
    format!(
        r#"#!/bin/sh
# harness guest init: mounts, network, sshd; then idles as PID 1.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
echo "{UPTIME_MARK}$(cat /proc/uptime)" > /dev/ttyS0
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
ip link set lo up
ip link set eth0 up
ip addr add {GUEST_IP}/24 dev eth0
ip route add default via 10.0.2.2
mkdir -p /etc/dropbear
chmod 700 /root /root/.ssh
chmod 600 /root/.ssh/authorized_keys
dropbear -r /etc/dropbear/dropbear_ed25519_host_key -s -p 22 -P /tmp/dropbear.pid
echo "{UPTIME_MARK}$(cat /proc/uptime)" > /dev/ttyS0
echo "{READY_MARK}" > /dev/ttyS0
while true; do sleep 3600; done
"#
    )
}

/// The guest-side runner: `/bench/run TIMEOUT PROGRAM ARGS...` prints the
/// aggregate /proc/stat cpu line before and after, and runs the program in a
/// session of its own so that at the timeout every process it started dies
/// with it (SIGTERM, then SIGKILL 5 s later): a benchmark's grandchildren
/// cannot outlive it and keep the SSH channel open. Exits with the program's
/// status, 124 when the timeout fired.
pub fn run_script() -> &'static str {
    r#"#!/bin/sh
t=$1; shift
echo "uptime0 $(cat /proc/uptime)"
echo "stat0 $(head -n1 /proc/stat)"
setsid "$@" &
pid=$!
killsession() {
    sig=$1
    for d in /proc/[0-9]*; do
        { read -r line < "$d/stat"; } 2>/dev/null || continue
        set -- ${line##*) }
        [ "$4" = "$pid" ] && kill "-$sig" "${d#/proc/}" 2>/dev/null
    done
}
( sleep "$t"; touch /tmp/bench-timeout.$pid; killsession TERM; sleep 5; killsession KILL ) </dev/null >/dev/null 2>&1 &
watchdog=$!
wait $pid
rc=$?
kill $watchdog 2>/dev/null
wait $watchdog 2>/dev/null
killsession KILL
if [ -e /tmp/bench-timeout.$pid ]; then rc=124; rm -f /tmp/bench-timeout.$pid; fi
echo "stat1 $(head -n1 /proc/stat)"
echo "uptime1 $(cat /proc/uptime)"
exit $rc
"#
}

/// Shared libraries an ELF needs, as host paths (from `ldd`).
pub fn needed_libs(elf: &Path) -> Result<Vec<PathBuf>> {
    let f = Cmd::new("ldd").arg(elf).capture().run()?;
    if f.output.contains("not a dynamic executable") || f.output.contains("statically linked") {
        return Ok(Vec::new());
    }
    if !f.success() {
        bail!("ldd {}: {}", elf.display(), f.output.trim());
    }
    Ok(parse_ldd(&f.output))
}

/// Parses ldd output into library paths (the loader included).
pub fn parse_ldd(out: &str) -> Vec<PathBuf> {
    out.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, r)) => r.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Host programs the image is made of.
pub struct HostBins {
    /// busybox (static).
    pub busybox: PathBuf,
    /// dropbear server.
    pub dropbear: PathBuf,
}

impl HostBins {
    /// Finds them, or says which package to install.
    pub fn find() -> Result<HostBins> {
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file());
        let Some(busybox) = busybox else {
            bail!("find busybox: install busybox-static (harness/scripts/setup-host.sh)")
        };
        let dropbear = PathBuf::from("/usr/sbin/dropbear");
        if !dropbear.is_file() {
            bail!("find /usr/sbin/dropbear: install dropbear-bin (harness/scripts/setup-host.sh)");
        }
        Ok(HostBins { busybox, dropbear })
    }
}

/// Benchmark programs built from `images/`.
pub const PROGRAMS: &[(&str, &str, bool)] = &[
    // (binary, source, static)
    ("doexec-static", "doexec.c", true),
    ("doexec-shared", "doexec.c", false),
    ("forkprlimit", "forkprlimit.c", true),
    ("forkexec", "forkexec.c", true),
    ("profmark", "profmark.c", true),
];

/// The benchmark sources in `images` (every `*.c` and `*.h`): file name → SHA-256.
pub fn benchmark_sources(images: &Path) -> Result<std::collections::BTreeMap<String, String>> {
    use sha2::{Digest, Sha256};
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(images).with_context(|| format!("read {}", images.display()))? {
        let p = e.with_context(|| format!("read {}", images.display()))?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if p.is_file() && (name.ends_with(".c") || name.ends_with(".h")) {
            let data = std::fs::read(&p).with_context(|| format!("read {}", p.display()))?;
            out.insert(name, crate::util::hex(&Sha256::digest(&data)));
        }
    }
    Ok(out)
}

/// The compiler that builds the benchmarks, as it names itself (the first
/// line of `gcc --version`), or `gcc not found`.
pub fn compiler() -> Result<String> {
    if crate::proc::which("gcc").is_none() {
        return Ok("gcc not found".into());
    }
    let f = Cmd::new("gcc")
        .arg("--version")
        .capture()
        .run_ok()
        .context("ask gcc its version")?;
    Ok(f.output.lines().next().unwrap_or("").trim().to_string())
}

/// Compiles the benchmark programs into `out`.
pub fn compile_benchmarks(images: &Path, out: &Path, log: &Path) -> Result<Vec<(String, PathBuf)>> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let mut bins = Vec::new();
    for (bin, src, stat) in PROGRAMS {
        let srcp = images.join(src);
        if !srcp.is_file() {
            bail!("find benchmark source {}", srcp.display());
        }
        let dst = out.join(bin);
        let mut c = Cmd::new("gcc")
            .args(["-O2", "-Wall", "-Wextra", "-Werror"])
            .arg("-I")
            .arg(images);
        if *stat {
            c = c.arg("-static");
        }
        c.arg("-o")
            .arg(&dst)
            .arg(&srcp)
            .log(log)
            .run_ok()
            .with_context(|| format!("compile {bin}"))?;
        bins.push((bin.to_string(), dst));
    }
    Ok(bins)
}

/// Makes the common archive: busybox, dropbear, libraries, benchmarks
/// (and the `program` benchmarks' files),
/// `/init`, the run's authorized key and the guest's pinned host key.
pub fn common_archive(
    host: &HostBins,
    benches: &[(String, PathBuf)],
    programs: &[GuestFile],
    keys: &Keys,
) -> Result<Archive> {
    let mut a = Archive::default();
    for d in [
        "/bin",
        "/sbin",
        "/usr/bin",
        "/usr/sbin",
        "/proc",
        "/sys",
        "/dev",
        "/tmp",
        "/root/.ssh",
        "/etc",
        "/lib/modules",
        "/bench",
        "/var/log",
    ] {
        a.dir(d);
    }
    busybox(&mut a, &host.busybox)?;
    a.host_file("/usr/sbin/dropbear", &host.dropbear)?;
    let mut elfs = vec![host.dropbear.clone()];
    for (name, path) in benches {
        a.host_file(&format!("/bench/{name}"), path)?;
        elfs.push(path.clone());
    }
    for f in programs {
        if !a.has(&f.guest) {
            a.host_file(&f.guest, &f.host)?;
            if programs::is_elf(&f.host) {
                elfs.push(f.host.clone());
            }
        }
    }
    libraries(&mut a, &elfs)?;
    a.file("/init", 0o755, init_script().into_bytes());
    a.file("/bench/run", 0o755, run_script().as_bytes().to_vec());
    a.file("/etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n".to_vec());
    a.file("/etc/group", 0o644, b"root:x:0:\n".to_vec());
    a.file("/etc/shells", 0o644, b"/bin/sh\n".to_vec());
    a.file(
        "/root/.ssh/authorized_keys",
        0o600,
        format!("{}\n", keys.authorized.trim()).into_bytes(),
    );
    let host_key = std::fs::read(&keys.host).with_context(|| format!("read {}", keys.host.display()))?;
    a.file("/etc/dropbear/dropbear_ed25519_host_key", 0o600, host_key);
    Ok(a)
}

/// busybox and a link to it for each of its applets.
fn busybox(a: &mut Archive, busybox: &Path) -> Result<()> {
    a.host_file("/bin/busybox", busybox)?;
    let applets = Cmd::new(busybox).arg("--list").capture().run_ok()?;
    for ap in applets
        .output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.contains('/'))
    {
        if ap != "busybox" {
            a.link(&format!("/bin/{ap}"), "busybox");
        }
    }
    Ok(())
}

/// The shared libraries every ELF of `elfs` needs, at their host paths,
/// and the loader where dynamic binaries look for it.
fn libraries(a: &mut Archive, elfs: &[PathBuf]) -> Result<()> {
    for e in elfs {
        for lib in needed_libs(e)? {
            let guest = lib.to_string_lossy().into_owned();
            if !a.has(&guest) {
                let real = std::fs::canonicalize(&lib).with_context(|| format!("resolve {}", lib.display()))?;
                a.host_file(&guest, &real)?;
            }
        }
    }
    // dynamic binaries look for the loader at /lib64; Debian keeps it in /lib/x86_64-linux-gnu
    if !a.has("/lib64/ld-linux-x86-64.so.2") {
        a.link(
            "/lib64/ld-linux-x86-64.so.2",
            "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
        );
    }
    Ok(())
}

/// Adds a kernel's modules: every `.ko` under its `lib/modules/<release>`
/// tree, plus `/lib/modules/<name>.ko` shortcuts for `insmod`. Symlinks are
/// not followed: `build` (and `source`) point into the shared work tree,
/// where another variant's modules may lie.
pub fn modules_archive(mods_root: &Path, release: &str) -> Result<Archive> {
    let mut a = Archive::default();
    let base = mods_root.join("lib/modules").join(release);
    let mut stack = vec![base.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("read {}", d.display()))? {
            let e = e.with_context(|| format!("read {}", d.display()))?;
            let p = e.path();
            let ft = e.file_type().with_context(|| format!("stat {}", p.display()))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && p.extension().is_some_and(|x| x == "ko") {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                a.host_file(&format!("/lib/modules/{name}"), &p)?;
            }
        }
    }
    Ok(a)
}

/// A run's SSH keys. The private ones live in the work directory
/// (`work/keys/<run-id>/`), never in the run directory, which travels with
/// archived runs.
#[derive(Debug, Clone)]
pub struct Keys {
    /// The client's private key, in OpenSSH format for libssh2.
    pub client: PathBuf,
    /// The client's public key line, the guest's `authorized_keys`.
    pub authorized: String,
    /// The guest's private host key (dropbear format), baked into the image:
    /// no key is generated in the guest (`dropbear -R` costs guest time).
    pub host: PathBuf,
    /// The host key's public line: the only key the harness accepts.
    pub host_public: String,
}

/// Makes (or, on `--resume`, reuses) a run's keys in `dir` with dropbearkey.
pub fn make_keys(dir: &Path, log: &Path) -> Result<Keys> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .with_context(|| format!("protect {}", dir.display()))?;
    let db = dir.join("id_dropbear");
    let client = dir.join("id_ed25519");
    if !client.is_file() {
        let _ = std::fs::remove_file(&db);
        dropbear_key(&db, log)?;
        Cmd::new("dropbearconvert")
            .args(["dropbear", "openssh"])
            .arg(&db)
            .arg(&client)
            .log(log)
            .run_ok()?;
    }
    let host = dir.join("dropbear_ed25519_host_key");
    Ok(Keys {
        client,
        authorized: dropbear_key(&db, log)?,
        host_public: dropbear_key(&host, log)?,
        host,
    })
}

/// The public line of the ed25519 key at `path`, made first if missing.
fn dropbear_key(path: &Path, log: &Path) -> Result<String> {
    if !path.is_file() {
        Cmd::new("dropbearkey")
            .args(["-t", "ed25519", "-f"])
            .arg(path)
            .log(log)
            .run_ok()
            .with_context(|| format!("make the SSH key {}", path.display()))?;
    }
    let f = Cmd::new("dropbearkey")
        .args(["-y", "-f"])
        .arg(path)
        .capture()
        .run_ok()?;
    f.output
        .lines()
        .find(|l| l.starts_with("ssh-"))
        .map(str::to_string)
        .with_context(|| format!("read the public key of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_is_newc_with_parents_and_trailer() {
        let mut a = Archive::default();
        a.file("/bench/x", 0o755, b"hello".to_vec());
        a.link("/bin/sh", "busybox");
        let c = a.to_cpio();
        assert_eq!(&c[..6], b"070701");
        assert_eq!(c.len() % 4, 0);
        let s = String::from_utf8_lossy(&c);
        for name in ["bench\0", "bench/x\0", "bin\0", "bin/sh\0", "TRAILER!!!\0", "hello"] {
            assert!(s.contains(name), "missing {name:?}");
        }
        // the file header: mode 100755, size 5
        let i = s.find("bench/x\0").unwrap();
        let h = &s[i - 110..i];
        assert_eq!(&h[14..22], "000081ed");
        assert_eq!(&h[54..62], "00000005");
    }

    #[test]
    fn cpio_round_trips_through_gnu_cpio() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut a = Archive::default();
        a.file("/etc/passwd", 0o644, b"root:x:0:0::/root:/bin/sh\n".to_vec());
        a.link("/bin/sh", "busybox");
        std::fs::write(dir.join("a.cpio"), a.to_cpio()).unwrap();
        let out = dir.join("x");
        std::fs::create_dir_all(&out).unwrap();
        Cmd::new("cpio")
            .args(["-idm", "--quiet", "-F"])
            .arg(dir.join("a.cpio"))
            .dir(&out)
            .run_ok()
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("etc/passwd")).unwrap(),
            "root:x:0:0::/root:/bin/sh\n"
        );
        assert_eq!(
            std::fs::read_link(out.join("bin/sh")).unwrap(),
            PathBuf::from("busybox")
        );
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn runner_kills_the_whole_benchmark_at_its_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::write(dir.join("run"), run_script()).unwrap();
        // a grandchild that leaves for its own process group, as forkprlimit's tree does
        let marker = format!("harness-runner-test-{}", std::process::id());
        let bench = format!(
            "python3 -c 'import os,time\nos.setpgid(0,0)\nwhile True: time.sleep(1)' {marker} & echo started; sleep 1000"
        );
        let start = std::time::Instant::now();
        let f = Cmd::new("busybox")
            .arg("sh")
            .arg(dir.join("run"))
            .args(["2", "sh", "-c", &bench])
            .capture()
            .run()
            .unwrap();
        assert_eq!(f.code, Some(124), "{}", f.output);
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        assert!(
            f.output.contains("stat0 cpu") && f.output.contains("stat1 cpu") && f.output.contains("started"),
            "{}",
            f.output
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        let left = Cmd::new("pgrep").args(["-f", &marker]).capture().run().unwrap();
        assert!(left.output.trim().is_empty(), "left behind: {}", left.output);
        let ok = Cmd::new("busybox")
            .arg("sh")
            .arg(dir.join("run"))
            .args(["5", "true"])
            .capture()
            .run()
            .unwrap();
        assert_eq!(ok.code, Some(0));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn module_walk_does_not_follow_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let rel = dir.join("mods/lib/modules/6.12.117");
        std::fs::create_dir_all(rel.join("kernel/lib")).unwrap();
        std::fs::write(rel.join("kernel/lib/test_vmalloc.ko"), b"ours").unwrap();
        // the work tree, where another variant built its own test_vmalloc.ko
        let tree = dir.join("tree");
        std::fs::create_dir_all(tree.join("lib")).unwrap();
        std::fs::write(tree.join("lib/test_vmalloc.ko"), b"theirs").unwrap();
        std::fs::write(tree.join("lib/other.ko"), b"other").unwrap();
        std::os::unix::fs::symlink(&tree, rel.join("build")).unwrap();
        std::os::unix::fs::symlink(tree.join("lib/other.ko"), rel.join("kernel/lib/link.ko")).unwrap();
        let a = modules_archive(&dir.join("mods"), "6.12.117").unwrap();
        assert!(matches!(a.entries.get("/lib/modules/test_vmalloc.ko"), Some(Entry::File(_, d)) if d == b"ours"));
        assert!(!a.has("/lib/modules/other.ko") && !a.has("/lib/modules/link.ko"));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn ldd_output_parsing() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n";
        assert_eq!(
            parse_ldd(out),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libz.so.1"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
    }
}
