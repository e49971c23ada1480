//! The symbols files the profiler plugin reads: the guest kernel's
//! functions ([`FILE`]) and its static data objects ([`DATA_FILE`], for
//! the contention counts), each `START SIZE NAME` (hex, sorted,
//! non-overlapping), written from the variant's `vmlinux` ELF symbol table,
//! read in-process (no `nm`).

use std::path::Path;

use anyhow::{Context, Result};
use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind, SymbolSection};

/// One function of the symbols file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sym {
    /// First address.
    pub start: u64,
    /// Bytes to the end (exclusive).
    pub size: u64,
    /// Name.
    pub name: String,
}

/// A code symbol as read from the ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSym {
    /// Address.
    pub addr: u64,
    /// `st_size` (0 for asm labels).
    pub size: u64,
    /// STT_FUNC (true) or STT_NOTYPE (false).
    pub func: bool,
    /// Global or weak binding.
    pub global: bool,
    /// Name.
    pub name: String,
    /// End of its section.
    pub section_end: u64,
}

/// Functions from code symbols: sorted; of several at one address the
/// sized function wins, then a global, then the first name in order; a
/// size reaches at most the next function; a size-0 label (asm entry code
/// such as `entry_SYSCALL_64`) reaches the next function or its section's
/// end.
pub fn functions(mut raw: Vec<RawSym>) -> Vec<Sym> {
    raw.retain(|r| {
        !r.name.is_empty()
            && !r.name.starts_with(".L")
            && !r.name.starts_with('$')
            && !r.name.contains(char::is_whitespace)
    });
    raw.sort_by(|a, b| {
        a.addr
            .cmp(&b.addr)
            .then((b.func && b.size > 0).cmp(&(a.func && a.size > 0)))
            .then(b.global.cmp(&a.global))
            .then(a.name.cmp(&b.name))
    });
    raw.dedup_by_key(|r| r.addr);
    let mut out = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let next = raw.get(i + 1).map(|n| n.addr).unwrap_or(u64::MAX);
        let end = if r.size > 0 {
            r.addr.saturating_add(r.size)
        } else {
            r.section_end
        }
        .min(next)
        .min(r.section_end.max(r.addr + 1));
        if end > r.addr {
            out.push(Sym {
                start: r.addr,
                size: end - r.addr,
                name: r.name.clone(),
            });
        }
    }
    out
}

/// The code symbols of an ELF image: FUNC and NOTYPE symbols defined in
/// executable sections.
pub fn raw_from_elf(data: &[u8]) -> Result<Vec<RawSym>> {
    let file = object::File::parse(data).context("parse ELF")?;
    let mut raw = Vec::new();
    for s in file.symbols() {
        let func = match s.kind() {
            SymbolKind::Text => true,
            SymbolKind::Unknown | SymbolKind::Label => false,
            _ => continue,
        };
        let SymbolSection::Section(idx) = s.section() else {
            continue;
        };
        let Ok(sec) = file.section_by_index(idx) else { continue };
        if sec.kind() != SectionKind::Text {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        raw.push(RawSym {
            addr: s.address(),
            size: s.size(),
            func,
            global: s.is_global(),
            name: name.to_string(),
            section_end: sec.address() + sec.size(),
        });
    }
    Ok(raw)
}

/// The data objects of an ELF image: OBJECT symbols with a size, defined
/// in writable data sections (`.data`, `.bss` and the like; the per-CPU
/// section's symbols are among them, at the addresses it is linked at),
/// sorted, of several at one address the first name in order, a size cut
/// at the next object.
pub fn data_from_elf(data: &[u8]) -> Result<Vec<Sym>> {
    let file = object::File::parse(data).context("parse ELF")?;
    let mut raw: Vec<Sym> = Vec::new();
    for s in file.symbols() {
        if s.kind() != SymbolKind::Data || s.size() == 0 {
            continue;
        }
        let SymbolSection::Section(idx) = s.section() else {
            continue;
        };
        let Ok(sec) = file.section_by_index(idx) else { continue };
        if !matches!(sec.kind(), SectionKind::Data | SectionKind::UninitializedData) {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        if name.is_empty() || name.contains(char::is_whitespace) {
            continue;
        }
        raw.push(Sym {
            start: s.address(),
            size: s.size(),
            name: name.to_string(),
        });
    }
    raw.sort_by(|a, b| a.start.cmp(&b.start).then(a.name.cmp(&b.name)));
    raw.dedup_by_key(|s| s.start);
    for i in 1..raw.len() {
        let next = raw[i].start;
        let prev = &mut raw[i - 1];
        prev.size = prev.size.min(next - prev.start);
    }
    Ok(raw)
}

/// The symbols file text.
pub fn render(syms: &[Sym]) -> String {
    let mut out = String::with_capacity(syms.len() * 40);
    out.push_str("# harness-profiler symbols: start size name (hex)\n");
    for s in syms {
        out.push_str(&format!("{:x} {:x} {}\n", s.start, s.size, s.name));
    }
    out
}

/// Writes the symbols file of `vmlinux` to `out`; returns how many
/// functions it lists. Refuses an image with no code symbols (stripped).
pub fn write_symbols(vmlinux: &Path, out: &Path) -> Result<usize> {
    write_file(vmlinux, out, |data| Ok(functions(raw_from_elf(data)?)), "function")
}

/// Writes the data symbols file of `vmlinux` to `out`; returns how many
/// objects it lists. Refuses an image with none.
pub fn write_data(vmlinux: &Path, out: &Path) -> Result<usize> {
    write_file(vmlinux, out, data_from_elf, "data")
}

fn write_file(vmlinux: &Path, out: &Path, read: fn(&[u8]) -> Result<Vec<Sym>>, what: &str) -> Result<usize> {
    let data = std::fs::read(vmlinux).with_context(|| format!("read {}", vmlinux.display()))?;
    let syms = read(&data).with_context(|| vmlinux.display().to_string())?;
    if syms.is_empty() {
        anyhow::bail!("{} has no {what} symbols (stripped?)", vmlinux.display());
    }
    crate::util::write_whole(out, render(&syms).as_bytes())?;
    Ok(syms.len())
}

/// The symbols file's name in a kernel's cache directory, beside its
/// `bzImage` and `vmlinux`.
pub const FILE: &str = "vmlinux.syms";

/// The data symbols file's name there.
pub const DATA_FILE: &str = "vmlinux.data";

/// Writes both symbols files of `vmlinux` into its directory `dir`
/// ([`FILE`], [`DATA_FILE`]) unless they are there already.
pub fn ensure_all(vmlinux: &Path, dir: &Path) -> Result<()> {
    ensure(vmlinux, &dir.join(FILE))?;
    ensure_with(vmlinux, &dir.join(DATA_FILE), write_data)?;
    Ok(())
}

/// Writes the symbols file of `vmlinux` to `out` unless it is there
/// already (written whole, [`crate::util::write_whole`], so a reader never
/// sees half of one and runs sharing the kernel may write it at once).
/// Returns whether it wrote it.
pub fn ensure(vmlinux: &Path, out: &Path) -> Result<bool> {
    ensure_with(vmlinux, out, write_symbols)
}

fn ensure_with(vmlinux: &Path, out: &Path, write: fn(&Path, &Path) -> Result<usize>) -> Result<bool> {
    if out.is_file() {
        return Ok(false);
    }
    write(vmlinux, out).map(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(addr: u64, size: u64, func: bool, global: bool, name: &str) -> RawSym {
        RawSym {
            addr,
            size,
            func,
            global,
            name: name.into(),
            section_end: 0x1000,
        }
    }

    #[test]
    fn functions_table() {
        let raw = vec![
            r(0x100, 0x20, true, true, "do_a"),
            r(0x100, 0, false, true, "_stext"), // a label at the same address: the sized function wins
            r(0x120, 0x40, true, false, "do_b"), // size cut at the next function
            r(0x140, 0x10, true, true, "do_c"),
            r(0x200, 0, false, true, "entry_asm"), // label: to the next function
            r(0x300, 0x10, true, false, "local_x"),
            r(0x300, 0x10, true, true, "global_x"), // same address: the global wins
            r(0x400, 0, false, false, ".Lloop"),    // local labels are dropped
            r(0xff0, 0, false, true, "_etext"),     // the last label ends with its section
        ];
        let got: Vec<(u64, u64, String)> = functions(raw).into_iter().map(|s| (s.start, s.size, s.name)).collect();
        let want = [
            (0x100, 0x20, "do_a"),
            (0x120, 0x20, "do_b"),
            (0x140, 0x10, "do_c"),
            (0x200, 0x100, "entry_asm"),
            (0x300, 0x10, "global_x"),
            (0xff0, 0x10, "_etext"),
        ];
        assert_eq!(got, want.map(|(a, b, c)| (a, b, c.to_string())).to_vec());
        let f = RawSym {
            section_end: 0xffffffff81000100,
            ..r(0xffffffff81000000, 0x10, true, true, "f")
        };
        let text = render(&functions(vec![f]));
        assert_eq!(
            text,
            "# harness-profiler symbols: start size name (hex)\nffffffff81000000 10 f\n"
        );
    }

    #[test]
    fn reads_a_real_elf() {
        // the test binary itself is an ELF with code symbols
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let syms = functions(raw_from_elf(&data).unwrap());
        assert!(syms.len() > 100, "{}", syms.len());
        assert!(
            syms.windows(2).all(|w| w[0].start + w[0].size <= w[1].start),
            "sorted and disjoint"
        );
        assert!(syms.iter().any(|s| s.name == "main"));
        assert!(raw_from_elf(b"not an elf").is_err());
    }

    /// Two runs sharing a kernel write its symbols file at once: each
    /// succeeds and the file is whole.
    #[test]
    fn runs_ensuring_at_once_all_succeed() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join(FILE);
        let exe = std::env::current_exe().unwrap();
        let start = std::sync::Barrier::new(4);
        let results: Vec<Result<bool, String>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        ensure(&exe, &out).map_err(|e| format!("{e:#}"))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        let mut one = d.path().join("one");
        one.set_extension("syms");
        write_symbols(&exe, &one).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&one).unwrap());
    }

    #[test]
    fn data_objects_of_a_real_elf() {
        // the test binary's statics are data objects
        let exe = std::env::current_exe().unwrap();
        let syms = data_from_elf(&std::fs::read(&exe).unwrap()).unwrap();
        assert!(syms.len() > 10, "{}", syms.len());
        assert!(
            syms.windows(2).all(|w| w[0].start + w[0].size <= w[1].start),
            "sorted and disjoint"
        );
        let d = tempfile::tempdir().unwrap();
        ensure_all(&exe, d.path()).unwrap();
        let text = std::fs::read_to_string(d.path().join(DATA_FILE)).unwrap();
        assert_eq!(text.lines().count(), syms.len() + 1, "a header and an object a line");
    }

    #[test]
    fn ensure_writes_once() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join(FILE);
        let exe = std::env::current_exe().unwrap();
        assert!(ensure(&exe, &out).unwrap());
        let first = std::fs::read_to_string(&out).unwrap();
        assert!(first.lines().count() > 100);
        assert!(
            !ensure(Path::new("/nonexistent/vmlinux"), &out).unwrap(),
            "kept, not rewritten"
        );
        assert!(ensure(Path::new("/nonexistent/vmlinux"), &d.path().join("other")).is_err());
    }
}
