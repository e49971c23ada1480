//! Just enough x86-64 decoding to classify one instruction from its bytes:
//! the legacy prefixes, a REX byte, and the first opcode bytes.

/// What the profiler needs to know about one instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Insn {
    /// An atomic read-modify-write: a `lock` (F0) prefix, or `xchg` with a
    /// memory operand (86/87, implicitly locked).
    pub lock: bool,
    /// `pause` (F3 90).
    pub pause: bool,
    /// `cpuid` (0F A2): a possible window marker.
    pub cpuid: bool,
    /// A direct call or unconditional jump and its target relative to the
    /// end of the instruction.
    pub branch: Option<Branch>,
}

/// A direct control transfer whose target is in the instruction bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Branch {
    /// `call rel32` (true) or `jmp rel32`/`jmp rel8` (false).
    pub call: bool,
    /// Displacement from the address after the instruction.
    pub rel: i64,
}

/// Classifies the instruction in `b` (its bytes, as many as QEMU gives).
pub fn classify(b: &[u8]) -> Insn {
    let mut i = 0;
    let mut out = Insn::default();
    let mut rep = false;
    while i < b.len() {
        match b[i] {
            0xF0 => out.lock = true,
            0xF3 => rep = true,
            0xF2 | 0x2E | 0x36 | 0x3E | 0x26 | 0x64 | 0x65 | 0x66 | 0x67 => {}
            _ => break,
        }
        i += 1;
    }
    let mut rex = 0u8;
    if i < b.len() && b[i] & 0xF0 == 0x40 {
        rex = b[i];
        i += 1;
    }
    let Some(&op) = b.get(i) else { return out };
    let next = b.get(i + 1).copied();
    match op {
        // F3 REX.B 90 is xchg with r8, not pause
        0x90 if rep && rex & 1 == 0 => out.pause = true,
        0x0F if next == Some(0xA2) => out.cpuid = true,
        0x86 | 0x87 => {
            if let Some(modrm) = next {
                if modrm >> 6 != 3 {
                    out.lock = true;
                }
            }
        }
        0xE8 | 0xE9 => {
            if let Some(d) = b.get(i + 1..i + 5) {
                let rel = i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64;
                out.branch = Some(Branch { call: op == 0xE8, rel });
            }
        }
        0xEB => {
            if let Some(&d) = b.get(i + 1) {
                out.branch = Some(Branch {
                    call: false,
                    rel: d as i8 as i64,
                });
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bytes, lock, pause, cpuid, branch
    type Case<'a> = (&'a [u8], bool, bool, bool, Option<Branch>);

    #[test]
    fn table() {
        let call = |rel| Some(Branch { call: true, rel });
        let jmp = |rel| Some(Branch { call: false, rel });
        let cases: &[Case] = &[
            // bytes, lock, pause, cpuid, branch
            (&[0xF3, 0x90], false, true, false, None),
            (&[0x90], false, false, false, None),
            (&[0xF3, 0x41, 0x90], false, false, false, None),
            (&[0x0F, 0xA2], false, false, true, None),
            (&[0xF0, 0x0F, 0xB1, 0x17], true, false, false, None), // lock cmpxchg %edx,(%rdi)
            (&[0xF0, 0x48, 0x0F, 0xC1, 0x07], true, false, false, None), // lock xadd %rax,(%rdi)
            (&[0x3E, 0xF0, 0xFF, 0x07], true, false, false, None), // ds lock incl (%rdi)
            (&[0x87, 0x07], true, false, false, None),             // xchg %eax,(%rdi)
            (&[0x48, 0x87, 0xC3], false, false, false, None),      // xchg %rax,%rbx
            (&[0xE8, 0x10, 0x00, 0x00, 0x00], false, false, false, call(16)),
            (&[0xE8, 0xFB, 0xFF, 0xFF, 0xFF], false, false, false, call(-5)),
            (&[0xE9, 0x00, 0x01, 0x00, 0x00], false, false, false, jmp(256)),
            (&[0xEB, 0xFE], false, false, false, jmp(-2)),
            (&[0xE8, 0x10], false, false, false, None), // truncated
            (&[0xF0], true, false, false, None),
            (&[], false, false, false, None),
            (&[0xFF, 0xD0], false, false, false, None), // call *%rax: no static target
        ];
        for (bytes, lock, pause, cpuid, branch) in cases {
            let got = classify(bytes);
            assert_eq!(
                got,
                Insn {
                    lock: *lock,
                    pause: *pause,
                    cpuid: *cpuid,
                    branch: *branch
                },
                "{bytes:02x?}"
            );
        }
    }
}
