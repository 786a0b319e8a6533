#!/usr/bin/env bash
# fresh_debian.sh SUITE ROOT_DIR -- MAKE_GOALS...
#
# The README's set-up on a fresh Debian machine, proven inside a root made by debootstrap from
# Debian's own package mirror: a minimal system of SUITE (bookworm = Debian 12, trixie =
# Debian 13) with only build-essential, git, ca-certificates and sudo, as a new machine has;
# this checkout's files copied in (what git tracks, or would track: in CI, a clean clone); then
# each `make GOAL` run inside it under chroot, which installs what is missing itself.
#
# The base system is made once and kept as ROOT_DIR.base.tar; each run unpacks it into a new
# ROOT_DIR, so every run starts from the fresh system (FRESH_BASE=1 makes the base again).
# tiny Shakespeare and GPT-2's tokenizer files are copied in beside the checkout where this
# machine has them (../shared/data, as the Makefile reads them), else the make steps download
# them. The environment's OPENBLAS_* settings pass through unchanged. Needs root (or sudo) for
# debootstrap, mount and chroot. Exit status: that of the first make goal that fails.
set -euo pipefail
suite=$1 root=$2
shift 2
[ "${1:-}" = "--" ] && shift
goals=("$@")
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
src=$(git rev-parse --show-toplevel)
SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)

# debootstrap, and the archive keys of the suite, from this machine's own packages.
if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
    echo "installing: debootstrap"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap >/dev/null
fi
PATH=$PATH:/usr/sbin:/sbin

mkdir -p "$(dirname "$root")"
base=$root.base.tar
if [ ! -f "$base" ] || [ "${FRESH_BASE:-0}" = 1 ]; then
    echo "== debootstrap $suite from $mirror"
    $SUDO rm -rf "$root.boot"
    $SUDO debootstrap --variant=minbase --include=build-essential,git,ca-certificates,sudo \
        "$suite" "$root.boot" "$mirror" > "$root.debootstrap.log" 2>&1 ||
        { tail -20 "$root.debootstrap.log"; echo "error: debootstrap $suite failed"; exit 1; }
    $SUDO tar -C "$root.boot" -cf "$base.tmp" . && $SUDO mv "$base.tmp" "$base"
    $SUDO rm -rf "$root.boot"
fi

mounts=()
cleanup() {
    local m
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do $SUDO umount -l "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== a fresh $suite root at $root"
[ -d "$root" ] && $SUDO rm -rf --one-file-system "$root"
$SUDO mkdir -p "$root"
$SUDO tar -C "$root" -xf "$base"
$SUDO cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev dev/pts; do
    $SUDO mkdir -p "$root/$m"
    case $m in
        proc) $SUDO mount -t proc proc "$root/proc" ;;
        *) $SUDO mount --bind "/$m" "$root/$m" ;;
    esac
    mounts+=("$root/$m")
done

# The checkout beside the data, as ../shared/data sits beside it here.
$SUDO mkdir -p "$root/work/handgrad" "$root/work/shared"
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | $SUDO tar -C "$root/work/handgrad" -xf -
[ -d "$src/../shared/data" ] && $SUDO cp -r "$src/../shared/data" "$root/work/shared/data"
$SUDO chroot "$root" sh -c '. /etc/os-release && echo "== inside: $PRETTY_NAME"'

status=0
for goal in "${goals[@]}"; do
    echo "== make $goal (in the $suite root)"
    # A login-like environment: the host's PATH and tool settings stay out, OPENBLAS_* pass.
    env_vars=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8)
    for v in $(compgen -e | grep '^OPENBLAS_' || true); do env_vars+=("$v=${!v}"); done
    # shellcheck disable=SC2086 # a goal may carry make variables: "test TEST_ARGS=..."
    if ! $SUDO chroot "$root" /usr/bin/env -i "${env_vars[@]}" bash -c "cd /work/handgrad && make $goal"; then
        echo "error: make $goal failed in the $suite root"
        status=1
        break
    fi
done
exit $status
