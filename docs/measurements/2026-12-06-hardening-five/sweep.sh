#!/usr/bin/env bash
# Issue 47's bad inputs, rebuilt from the issue's text and fed through the
# CLI (`check`, `history`, `report`): one line per input with the exit
# code, the time taken and what the harness said first at error (or warn)
# level. Needs no kernel build and no boot: a two-file kernel source
# stands in for the tarball, as in the fast tests. Run from the checkout
# after `cargo build --release`:
#   docs/measurements/2026-12-06-hardening-five/sweep.sh
set -uo pipefail
H=${HARNESS:-$PWD/target/release/harness}
T=$(mktemp -d /tmp/sweep.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/src/kernel" "$T/patches" "$T/files"
printf 'VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 0\n' >"$T/src/Makefile"
printf 'int a = 1;\nint b = 2;\n' >"$T/src/kernel/sys.c"

top() { printf 'kernel: {source: %s}\nseries_dir: %s\nvcpus: [2]\n' "$T/src" "$T/patches"; }
prog() { printf 'benchmarks:\n  - {name: p, kind: program, run: /bin/true%s}\n' "$1"; }
base() { printf 'variants: [{name: base}]\n'; }

# said NAME FILTER: the harness's first line at that level (error, then warn)
said() {
    local name=$1 start end rc out
    start=$(date +%s.%N)
    out=$(timeout 600 "${@:2}" 2>&1)
    rc=$?
    end=$(date +%s.%N)
    local line
    # "N problem(s):" is followed by the problems: the first is shown
    line=$(printf '%s\n' "$out" | awk '/^(ERROR|error)/ && !n { n = 1; l = $0; if (l !~ /problem\(s\):$/) { print l; exit } next }
        n { print l " " $0; exit }')
    [ -n "$line" ] || line=$(printf '%s\n' "$out" | grep -m1 -E '^warn' || printf '%s\n' "$out" | tail -1)
    printf '%-28s rc=%-3s %6.2fs  %s\n' "$name" "$rc" "$(echo "$end - $start" | bc)" "${line:0:260}"
}
check() { said "$1" "$H" --work-dir "$T/work" check "$2"; }
m() { cat >"$T/$1.yaml"; echo "$T/$1.yaml"; }

# --- the gate's keys
check key-typo "$(m key <<EOF
$(top)
$(base)
benchmarks: [{name: static-doexec, kind: doexec}]
key_metrics: [static-doexec.execs_per_sec]
EOF
)"
check threshold-typo "$(m thr <<EOF
$(top)
$(base)
benchmarks: [{name: s, kind: doexec}]
statistics: {thresholds: {s.nope: 5%}}
EOF
)"
# --- caps
python3 - "$T/alias.yaml" "$T" <<'PY'
import sys
t = sys.argv[2]
blob = "x" * 1_000_000
aliases = ", ".join(["*s"] * 10_000)
open(sys.argv[1], "w").write(
    f"kernel: {{source: {t}/src}}\nvcpus: [2]\nvariants: [{{name: base}}]\n"
    f"benchmarks:\n  - {{name: p, kind: program, run: /bin/true, args: [&s \"{blob}\", {aliases}]}}\n")
PY
check alias-bomb-10000x1MB "$T/alias.yaml"
check args-item-8KiB "$(m args <<EOF
$(top)
$(base)
$(prog ", args: [$(head -c 8192 /dev/zero | tr '\0' a)]")
EOF
)"
truncate -s 1200M "$T/files/big.bin"
check files-1.2GB "$(m big <<EOF
$(top)
$(base)
$(prog ", files: [$T/files/big.bin]")
EOF
)"
mkdir -p "$T/files/loop" && ln -s . "$T/files/loop/self" && ln -s .. "$T/files/loop/parent"
check files-dir-self-links "$(m loop <<EOF
$(top)
$(base)
$(prog ", files: [$T/files/loop]")
EOF
)"
check memory-1e12-MiB "$(m mem <<EOF
$(top)
$(base)
guest: {memory_mib: 1000000000000}
$(prog "")
EOF
)"
check user-4294967295 "$(m user <<EOF
$(top)
$(base)
$(prog ", user: 4294967295")
EOF
)"
sed 's#run: /bin/true#run: /etc/passwd#' >"$T/passwd.yaml" <<EOF
$(top)
$(base)
$(prog "")
EOF
check run-etc-passwd "$T/passwd.yaml"
check vcpus-100000 "$(m vcpus <<EOF
kernel: {source: $T/src}
vcpus: [100000]
$(base)
$(prog "")
EOF
)"
# --- the matrix file itself
{ printf '\xef\xbb\xbf'; top; base; prog ""; } >"$T/bom.yaml"
check bom-valid-matrix "$T/bom.yaml"
{ top; base; prog ""; printf 'vcpus: [4]\n'; } >"$T/dup.yaml"
check duplicate-key "$T/dup.yaml"
{ top; base; printf 'benchmarks: [{name: "caf\xe9", kind: doexec}]\n'; } >"$T/latin.yaml"
check not-utf8 "$T/latin.yaml"
{ top; base; printf 'benchmarks: [{name: "a\xe2\x80\xaeb", kind: doexec}]\n'; } >"$T/bidi.yaml"
check bidi-in-a-name "$T/bidi.yaml"
check unselected-profile-broken "$(m prof <<EOF
$(top)
$(base)
$(prog "")
profiles: {nightly: {benchmarks: [nope]}}
EOF
)"
# --- series as mail arrives, and series no variant uses
mk_series() { mkdir -p "$T/patches/$1"; cat >"$T/patches/$1/0001-p.patch"; echo 0001-p.patch >"$T/patches/$1/series"; }
diff='--- a/kernel/sys.c
+++ b/kernel/sys.c
@@ -1,2 +1,2 @@
 int a =3D 1;
-int b =3D 2;'
printf 'From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] p\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\n---\n%s\n+int b =3D 3; /* Gr=FC=DFe */\n' "$diff" | mk_series qp
printf 'From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] p\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n\n---\n%s\n+int b = 3; /* Gr\xfc\xdfe */\n' "${diff//=3D/=}" | mk_series latin1
printf 'From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] p\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n%s\n' \
    "$(printf -- '---\n%s\n+int b = 3;\n' "${diff//=3D/=}" | base64 -w 76)" | mk_series b64
printf 'From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] blob\n\n---\ndiff --git a/fw/blob.bin b/fw/blob.bin\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..f971a5e28b6c4cb237ca3c7349e33bb600dbc907\nGIT binary patch\nliteral 4\nLcmZQzWcm*P0SW;F\n\nliteral 0\nHcmV?d00001\n\n-- \n2.47.3\n' | mk_series binary
printf 'Subject: x\nContent-Type: text/plain; charset=koi8-r\n\n---\n%s\n' "${diff//=3D/=}" | mk_series koi8
printf 'not a diff at all\n' | mk_series unused-broken
for s in qp latin1 b64 binary koi8; do
    f=$(m "series-$s" <<EOF
$(top)
variants: [{name: base}, {name: v, apply: [$s]}]
benchmarks: [{name: s, kind: doexec}]
EOF
)
    said "series-$s" sh -c "'$H' --work-dir '$T/work' --json check '$f' | python3 -c 'import json,sys; [print(i[\"level\"], i[\"what\"]+\":\", i[\"message\"]) for i in json.load(sys.stdin) if i[\"what\"] == \"series $s\"]'"
done
# --- history
"$H" --work-dir "$T/work" --history-db "$T/h.sqlite" history import harness/tests/fixtures/history-runs/* >/dev/null 2>&1
python3 - "$T/h.sqlite" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
for page in (2, 3, 4):
    b[4096 * page:4096 * (page + 1)] = bytes(4096)
open(p, "wb").write(b)
PY
said history-zeroed-pages "$H" --work-dir "$T/work" --history-db "$T/h.sqlite" history
mkdir -p "$T/dir.sqlite"
said history-db-a-directory "$H" --work-dir "$T/work" --history-db "$T/dir.sqlite" history
