#!/bin/sh
# mkinitramfs.sh OUT.cpio 'profbench args' ['profbench args' ...]
# A minimal initramfs for checking the profiler by hand: busybox-static,
# a static profbench, and an /init that runs profbench once per argument,
# prints its result lines on the console, and powers off.
set -eu
out=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/bin" "$d/proc" "$d/sys" "$d/dev" "$d/tmp"
cp /bin/busybox "$d/bin/busybox"
for t in sh mount poweroff echo cat; do ln -s busybox "$d/bin/$t"; done
gcc -static -O2 -Wall -Wextra -Werror -o "$d/profbench" "$here/profbench.c"
{
	echo '#!/bin/sh'
	echo 'mount -t proc proc /proc'
	echo 'echo "profbench: start"'
	for a in "$@"; do echo "/profbench $a"; done
	echo 'echo "profbench: done"'
	echo 'poweroff -f'
} > "$d/init"
chmod 755 "$d/init"
(cd "$d" && find . | cpio -o -H newc --quiet) > "$out"
