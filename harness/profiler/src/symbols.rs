//! The guest kernel's functions: address ranges and names, from a symbols
//! file, and the buckets for everything else.

/// A guest address outside the kernel text is attributed to one of these,
/// numbered after the functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// User space (lower canonical half).
    User,
    /// The module area, outside every listed function.
    Module,
    /// Any other kernel-half address outside every listed function.
    Other,
}

impl Bucket {
    /// All buckets, in index order after the functions.
    pub const ALL: [Bucket; 3] = [Bucket::User, Bucket::Module, Bucket::Other];

    /// Its name in the profile.
    pub fn name(self) -> &'static str {
        match self {
            Bucket::User => "[user]",
            Bucket::Module => "[module]",
            Bucket::Other => "[other]",
        }
    }
}

/// First address of the x86-64 kernel half.
pub const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;
/// x86-64 module area (MODULES_VADDR..MODULES_END without KASLR's larger
/// image size; with KASLR it starts at 0xffffffffc0000000, inside this).
pub const MODULES: (u64, u64) = (0xffff_ffff_a000_0000, 0xffff_ffff_ff00_0000);

/// Sorted, non-overlapping function ranges.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    starts: Vec<u64>,
    ends: Vec<u64>,
    names: Vec<String>,
}

impl Symbols {
    /// Parses a symbols file: one function per line, `START SIZE NAME` with
    /// START and SIZE in hex (what the harness writes), or `nm -n` lines
    /// `ADDR TYPE NAME` (text types T/t/W/w only; a size reaches the next
    /// symbol). Blank lines and `#` comments are skipped. Overlaps are cut
    /// at the next start; of several names at one address the first wins.
    pub fn parse(text: &str) -> Result<Symbols, String> {
        let lines: Vec<(usize, Vec<&str>)> = text
            .lines()
            .enumerate()
            .map(|(n, l)| (n + 1, l.split_whitespace().collect::<Vec<_>>()))
            .filter(|(_, f)| !f.is_empty() && !f[0].starts_with('#'))
            .collect();
        // nm lines have a type letter where our lines have a hex size; a
        // single letter a-f is both, so decide for the whole file: nm if any
        // second field is not hex.
        let is_hex = |s: &str| !s.is_empty() && s.trim_start_matches("0x").chars().all(|c| c.is_ascii_hexdigit());
        let nm = lines.iter().any(|(_, f)| f.len() == 3 && !is_hex(f[1]));
        let mut raw: Vec<(u64, Option<u64>, String)> = Vec::new();
        for (n, f) in &lines {
            if f.len() != 3 {
                return Err(format!("line {n}: expected 3 fields, got {}", f.join(" ")));
            }
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16);
            let start = hex(f[0]).map_err(|e| format!("line {n}: address {:?}: {e}", f[0]))?;
            if nm {
                if matches!(f[1], "T" | "t" | "W" | "w") {
                    raw.push((start, None, f[2].to_string()));
                }
                continue;
            }
            let size = hex(f[1]).map_err(|e| format!("line {n}: size {:?}: {e}", f[1]))?;
            raw.push((start, Some(size), f[2].to_string()));
        }
        // stable: the first of several names at one address stays first
        raw.sort_by_key(|r| r.0);
        let mut s = Symbols::default();
        for i in 0..raw.len() {
            let (start, size, ref name) = raw[i];
            if s.starts.last() == Some(&start) {
                continue;
            }
            let next = raw[i + 1..].iter().map(|r| r.0).find(|&a| a > start);
            let end = match (size, next) {
                (Some(sz), Some(nx)) if sz > 0 => (start + sz).min(nx),
                (Some(sz), None) if sz > 0 => start + sz,
                (_, Some(nx)) => nx,
                // the last nm symbol with no size: give it one byte
                (_, None) => start + 1,
            };
            s.starts.push(start);
            s.ends.push(end);
            s.names.push(name.clone());
        }
        Ok(s)
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// No functions at all.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Number of functions and buckets: the size of a counter array.
    pub fn slots(&self) -> usize {
        self.len() + Bucket::ALL.len()
    }

    /// The index of a bucket.
    pub fn bucket(&self, b: Bucket) -> u32 {
        (self.len() + b as usize) as u32
    }

    /// Function or bucket of an address.
    pub fn locate(&self, addr: u64) -> u32 {
        if let Some(i) = self.function(addr) {
            return i as u32;
        }
        if addr < KERNEL_HALF {
            self.bucket(Bucket::User)
        } else if (MODULES.0..MODULES.1).contains(&addr) {
            self.bucket(Bucket::Module)
        } else {
            self.bucket(Bucket::Other)
        }
    }

    /// The function containing an address.
    pub fn function(&self, addr: u64) -> Option<usize> {
        let i = self.starts.partition_point(|&s| s <= addr).checked_sub(1)?;
        (addr < self.ends[i]).then_some(i)
    }

    /// First address of function `i`.
    pub fn start(&self, i: usize) -> u64 {
        self.starts[i]
    }

    /// End (exclusive) of function `i`.
    pub fn end(&self, i: usize) -> u64 {
        self.ends[i]
    }

    /// Is `i` a function (not a bucket)?
    pub fn is_function(&self, i: u32) -> bool {
        (i as usize) < self.len()
    }

    /// The first function named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Name of a function or bucket.
    pub fn name(&self, i: u32) -> &str {
        match self.names.get(i as usize) {
            Some(n) => n,
            None => Bucket::ALL
                .get(i as usize - self.len())
                .map(|b| b.name())
                .unwrap_or("[?]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_format_and_nm_format() {
        let own = "# start size name\nffffffff81000000 10 _stext\nffffffff81000010 20 do_thing\nffffffff81000040 0 asm_label\nffffffff81000050 8 last\nffffffff81000060 d short_d\n";
        let s = Symbols::parse(own).unwrap();
        assert_eq!(s.len(), 5);
        // size "d" is hex 13 here, not an nm type letter
        assert_eq!(s.name(s.locate(0xffff_ffff_8100_006c)), "short_d");
        let cases = [
            (0xffff_ffff_8100_0000u64, "_stext"),
            (0xffff_ffff_8100_000f, "_stext"),
            (0xffff_ffff_8100_0010, "do_thing"),
            (0xffff_ffff_8100_002f, "do_thing"),
            (0xffff_ffff_8100_0030, "[other]"),   // gap after do_thing's size
            (0xffff_ffff_8100_0040, "asm_label"), // size 0: reaches the next symbol
            (0xffff_ffff_8100_004f, "asm_label"),
            (0xffff_ffff_8100_0057, "last"),
            (0xffff_ffff_8100_0058, "[other]"),
            (0xffff_ffff_8100_006d, "[other]"),
            (0x401000, "[user]"),
            (0xffff_ffff_c000_1000, "[module]"),
            (0xffff_8880_0000_0000, "[other]"),
        ];
        for (a, want) in cases {
            assert_eq!(s.name(s.locate(a)), want, "{a:#x}");
        }
        let nm = "ffffffff81000000 T _stext\nffffffff81000000 T _text\nffffffff81000010 t helper\nffffffff81000018 D some_data\nffffffff81000020 W weak_fn\n";
        let s = Symbols::parse(nm).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.name(s.locate(0xffff_ffff_8100_0005)), "_stext");
        // data symbols are not functions and do not end one
        assert_eq!(s.name(s.locate(0xffff_ffff_8100_001f)), "helper");
        assert_eq!(s.name(s.locate(0xffff_ffff_8100_0020)), "weak_fn");
        assert!(Symbols::parse("xyz 1 f\n").is_err());
        assert!(Symbols::parse("ffff 1\n").is_err());
    }
}
