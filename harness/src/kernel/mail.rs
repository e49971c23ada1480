//! A patch as it arrives by mail, made the patch `patch(1)` applies: a
//! quoted-printable or base64 body decoded and an ISO-8859-1 (Latin-1)
//! body made UTF-8, as `git mailinfo` does before `git am` applies it.
//! A mail that needs none of this is kept byte for byte.

/// Why a mail could not be made a patch.
#[derive(Debug, PartialEq)]
pub enum Undecodable {
    /// A multipart mail: the patch is an attachment.
    Multipart,
    /// A charset this harness does not convert.
    Charset(String),
    /// A base64 body with a byte outside base64.
    Base64(u8),
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undecodable::Multipart => write!(
                f,
                "a multipart mail (the patch is an attachment): save the attachment itself as the patch"
            ),
            Undecodable::Charset(c) => write!(
                f,
                "charset `{c}` is not one this harness converts (UTF-8, US-ASCII, ISO-8859-1): \
                 convert the mail to UTF-8 first (iconv -f {c} -t UTF-8)"
            ),
            Undecodable::Base64(b) => write!(f, "its base64 body holds `{}`, which is not base64", b.escape_ascii()),
        }
    }
}

/// The headers of interest: (lowercased name, value), continuation lines
/// joined.
fn headers(head: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in head.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1.push(' ');
                last.1.push_str(line.trim());
            }
        } else if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    out
}

/// The `charset=` parameter of a Content-Type value, lowercased.
fn charset(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("charset")).then(|| v.trim().trim_matches('"').to_ascii_lowercase())
    })
}

/// The mail `msg` as a patch: its body decoded when its transfer encoding
/// is quoted-printable or base64, converted to UTF-8 when its charset is
/// ISO-8859-1; the headers kept but for those two, which then say `8bit`
/// and `UTF-8`. Unchanged (the same bytes) when there is nothing to do.
pub fn as_patch(msg: &[u8]) -> Result<Vec<u8>, Undecodable> {
    // a mail saved with CRLF line ends (mail clients, some archives): LF, as `git mailsplit` makes it
    let first = msg.iter().position(|&b| b == b'\n');
    if first.is_some_and(|i| i > 0 && msg[i - 1] == b'\r') {
        return as_patch(&crlf_to_lf(msg));
    }
    let split = msg.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let Some(at) = split else {
        return Ok(msg.to_vec());
    };
    let head = String::from_utf8_lossy(&msg[..at]);
    let hs = headers(&head);
    let get = |k: &str| hs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let content_type = get("content-type").unwrap_or("text/plain");
    if content_type.to_ascii_lowercase().starts_with("multipart/") {
        return Err(Undecodable::Multipart);
    }
    let encoding = get("content-transfer-encoding").unwrap_or("8bit").to_ascii_lowercase();
    let cs = charset(content_type).unwrap_or_else(|| "utf-8".into());
    let latin1 = match cs.as_str() {
        "utf-8" | "utf8" | "us-ascii" | "ascii" => false,
        "iso-8859-1" | "iso8859-1" | "latin1" | "latin-1" => true,
        other => return Err(Undecodable::Charset(other.to_string())),
    };
    let body = &msg[at..];
    let decoded = match encoding.as_str() {
        "quoted-printable" => quoted_printable(body),
        "base64" => crate::util::base64_decode(body).map_err(Undecodable::Base64)?,
        _ if !latin1 => return Ok(msg.to_vec()),
        _ => body.to_vec(),
    };
    let body = if latin1 {
        decoded.iter().map(|&b| b as char).collect::<String>().into_bytes()
    } else {
        decoded
    };
    let mut out = headers_rewritten(&head);
    out.extend_from_slice(&body);
    Ok(out)
}

/// `msg` with each CR that ends a line removed.
fn crlf_to_lf(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len());
    for (i, &b) in msg.iter().enumerate() {
        if !(b == b'\r' && msg.get(i + 1) == Some(&b'\n')) {
            out.push(b);
        }
    }
    out
}

/// The mail's header lines with its transfer encoding and content type
/// said anew (`8bit`, `text/plain; charset=UTF-8`): its body is decoded.
fn headers_rewritten(head: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len());
    let mut replaced = false;
    for line in head.lines() {
        let lower = line.to_ascii_lowercase();
        let new: Option<&[u8]> = if lower.starts_with("content-transfer-encoding:") {
            Some(b"Content-Transfer-Encoding: 8bit\n")
        } else if lower.starts_with("content-type:") {
            Some(b"Content-Type: text/plain; charset=UTF-8\n")
        } else {
            None
        };
        match new {
            Some(h) => out.extend_from_slice(h),
            // the continuation of a header written anew is left out with it
            None if replaced && line.starts_with([' ', '\t']) => continue,
            None => {
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
        }
        replaced = new.is_some();
    }
    out
}

/// Quoted-printable (RFC 2045) decoded: `=XX` is the byte XX, `=` at a
/// line's end joins it to the next; anything else is kept as written.
fn quoted_printable(body: &[u8]) -> Vec<u8> {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'=' if body[i + 1..].starts_with(b"\r\n") => i += 3,
            b'=' if body[i + 1..].starts_with(b"\n") => i += 2,
            b'=' if i + 2 < body.len() => match (hex(body[i + 1]), hex(body[i + 2])) {
                (Some(a), Some(b)) => {
                    out.push(a << 4 | b);
                    i += 3;
                }
                _ => {
                    out.push(b'=');
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str =
        "---\n--- a/kernel/sys.c\n+++ b/kernel/sys.c\n@@ -1 +1 @@\n-\tint a = 1;\n+\tint a = 2;  /* caf\u{e9} */\n";

    fn mail(headers: &str, body: &[u8]) -> Vec<u8> {
        let mut m = format!("From: A <a@x>\nSubject: [PATCH] t\n{headers}\n").into_bytes();
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn a_plain_mail_is_kept_byte_for_byte() {
        let m = mail("Content-Type: text/plain; charset=UTF-8\n", DIFF.as_bytes());
        assert_eq!(as_patch(&m).unwrap(), m);
        let bare = mail("", DIFF.as_bytes());
        assert_eq!(as_patch(&bare).unwrap(), bare);
    }

    #[test]
    fn encoded_bodies_become_the_diff_they_carry() {
        let want = mail(
            "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n",
            DIFF.as_bytes(),
        );
        let qp = "---\n--- a/kernel/sys.c\n+++ b/kernel/sys.c\n@@ -1 +1 @@\n-\tint a =3D 1;\n+\tint a =3D 2;=20=\n /* caf=C3=A9 */\n";
        let latin1_qp = qp.replace("=C3=A9", "=E9");
        let b64 = {
            let enc = |b: &[u8]| {
                let t = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                let mut s = String::new();
                for ch in b.chunks(3) {
                    let n = ch
                        .iter()
                        .enumerate()
                        .fold(0u32, |a, (i, &x)| a | (x as u32) << (16 - 8 * i));
                    for k in 0..=ch.len() {
                        s.push(t[(n >> (18 - 6 * k) & 63) as usize] as char);
                    }
                }
                while !s.len().is_multiple_of(4) {
                    s.push('=');
                }
                s
            };
            let e = enc(DIFF.as_bytes());
            format!("{}\n{}\n", &e[..40], &e[40..])
        };
        let latin1_8bit: Vec<u8> = DIFF.chars().map(|c| c as u32 as u8).collect();
        let cases: [(&str, Vec<u8>); 4] = [
            (
                "Content-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: quoted-printable\n",
                qp.into(),
            ),
            (
                "Content-Type: text/plain;\n charset=\"iso-8859-1\"\nContent-Transfer-Encoding: quoted-printable\n",
                latin1_qp.into(),
            ),
            (
                "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n",
                b64.into(),
            ),
            (
                "Content-Type: text/plain; charset=ISO-8859-1\nContent-Transfer-Encoding: 8bit\n",
                latin1_8bit,
            ),
        ];
        for (h, body) in cases {
            let got = as_patch(&mail(h, &body)).unwrap();
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want), "{h}");
            // issue 58: the same mail saved with CRLF line ends
            let crlf: Vec<u8> = mail(h, &body)
                .iter()
                .flat_map(|&b| if b == b'\n' { vec![b'\r', b'\n'] } else { vec![b] })
                .collect();
            let got = as_patch(&crlf).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "CRLF {h}"
            );
        }
    }

    #[test]
    fn what_cannot_be_decoded_says_what_to_do() {
        let cases = [
            ("Content-Type: multipart/mixed; boundary=x\n", "a multipart mail"),
            (
                "Content-Type: text/plain; charset=koi8-r\n",
                "charset `koi8-r` is not one",
            ),
            ("Content-Transfer-Encoding: base64\n", "holds `-`, which is not base64"),
        ];
        for (h, want) in cases {
            let e = as_patch(&mail(h, DIFF.as_bytes())).unwrap_err().to_string();
            assert!(e.contains(want), "{h}: {e}");
        }
    }
}
