#!/usr/bin/env bash
# example_check.sh — `make example-check`: handgrad as another program sees it.
#
# In a fresh temporary prefix, twice: once with the shared library (linked with
# `pkg-config --cflags --libs handgrad`), once with SHARED=0, the static one (`pkg-config
# --static`, which adds the libraries a static link needs):
#   1. make install PREFIX=$prefix; every installed header compiles on its own, from the prefix,
#      with pkg-config's Cflags alone and the project's warnings as errors (first pass only);
#   2. apps/example/train_and_sample.cpp is compiled from a directory outside the tree with nothing but
#      pkg-config's flags, and linked to the library it should be (or not: the static pass);
#   3. it runs: its loss after training must be below its loss before by at least 1 nat, and
#      build/sample must read the checkpoint it wrote and print text;
#   4. make uninstall leaves the prefix as it found it: empty on the first pass; on the second,
#      holding only a file planted before the install, in directories that were there before.
# Then, with no compiler involved: DESTDIR staging (install, then uninstall, from the same
# DESTDIR), and an install over an install, which must uninstall to an empty prefix as well.
# Environment (set by the Makefile): MAKE, BUILD, CXX, JOBS, HG_WARN.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make} BUILD=${BUILD:-build} CXX=${CXX:-g++} JOBS=${JOBS:-$(nproc)}
HG_WARN=${HG_WARN:--Wall}
src=$(pwd)
tmp=$(mktemp -d /tmp/handgrad-example.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "example-check: FAILED: $*"; exit 1; }
say() { echo "example-check: $*"; }
mk() { "$MAKE" --no-print-directory -C "$src" "$@"; }
# Everything under $1 except what is listed after it (paths relative to $1).
leftovers() {
  local dir=$1; shift
  (cd "$dir" && find . -mindepth 1 | sed 's|^\./||' | sort |
     grep -vxF -f <(printf '%s\n' "$@" "")) || true
}

for kind in shared static; do
  prefix=$tmp/prefix-$kind work=$tmp/work-$kind
  mkdir -p "$prefix" "$work"
  planted=()
  if [ $kind = static ]; then  # someone else's file, in directories the install then finds there
    mkdir -p "$prefix/lib/pkgconfig" && echo other > "$prefix/lib/pkgconfig/other.pc"
    planted=(lib lib/pkgconfig lib/pkgconfig/other.pc)
  fi
  say "== $kind: make install PREFIX=$prefix"
  shared=$([ $kind = shared ] && echo 1 || echo 0)
  mk install PREFIX="$prefix" SHARED=$shared > "$work/install.log" ||
    { cat "$work/install.log"; fail "make install"; }
  tail -1 "$work/install.log"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  pkg-config --exists handgrad || fail "pkg-config finds no handgrad in $PKG_CONFIG_PATH"
  [ "$(pkg-config --variable=prefix handgrad)" = "$prefix" ] || fail "handgrad.pc's prefix is wrong"
  ! grep -rn '#include "lib/' "$prefix/include/handgrad" || fail "a header includes \"lib/...\""

  if [ $kind = shared ]; then
    # Every header on its own, from a directory with nothing else in it.
    mkdir -p "$work/headers"
    (cd "$prefix/include" && find handgrad -name '*.h' | sort) > "$work/headers.txt"
    n=$(wc -l < "$work/headers.txt")
    [ "$n" -gt 0 ] || fail "no headers installed"
    while read -r h; do
      echo "#include <$h>" > "$work/headers/$(echo "$h" | tr / _).cpp"
    done < "$work/headers.txt"
    cflags=$(pkg-config --cflags handgrad)
    # shellcheck disable=SC2086
    (cd "$work/headers" && ls ./*.cpp | xargs -P "$JOBS" -I{} sh -c \
      "$CXX $HG_WARN -Werror $cflags -fsyntax-only {} || { echo 'in {}'; exit 255; }") \
      || fail "an installed header does not compile on its own"
    say "ok: each of the $n installed headers compiles alone with \`pkg-config --cflags handgrad\`"
    libs=$(pkg-config --cflags --libs handgrad)
  else
    libs=$(pkg-config --static --cflags --libs handgrad)
  fi

  cp apps/example/train_and_sample.cpp "$work/"
  say "$CXX train_and_sample.cpp $libs"
  # shellcheck disable=SC2086
  (cd "$work" && $CXX train_and_sample.cpp $libs -o train_and_sample) ||
    fail "the example does not build"
  needed=$(readelf -d "$work/train_and_sample" | grep NEEDED | grep -c libhandgrad || true)
  if [ $kind = shared ]; then
    [ "$needed" = 1 ] || fail "the shared build does not load libhandgrad.so"
  else
    [ "$needed" = 0 ] || fail "the static build loads libhandgrad.so"
  fi

  (cd "$work" && LD_LIBRARY_PATH="$prefix/lib" ./train_and_sample --out=ckpt.safetensors) \
    > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "the example did not run"; }
  sed -n '1,3p' "$work/run.log"
  before=$(sed -n 's/^loss before training: \([0-9.]*\)$/\1/p' "$work/run.log")
  after=$(sed -n 's/^loss after [0-9]* steps: \([0-9.]*\)$/\1/p' "$work/run.log")
  [ -n "$before" ] && [ -n "$after" ] || { cat "$work/run.log"; fail "no loss in its output"; }
  awk -v b="$before" -v a="$after" 'BEGIN { exit !(a < b - 1) }' \
    || fail "the loss fell from $before to $after only (at least 1 nat expected)"
  say "ok: loss $before -> $after"
  "$BUILD"/sample --ckpt="$work/ckpt.safetensors" --max_new_tokens=100 > "$work/sample.log" 2>&1 \
    || { cat "$work/sample.log"; fail "build/sample cannot read the example's checkpoint"; }
  [ "$(tr -d ' \n-' < "$work/sample.log" | wc -c)" -ge 50 ] ||
    { cat "$work/sample.log"; fail "build/sample printed no text"; }
  say "ok: build/sample reads its checkpoint: $(head -c 60 "$work/sample.log" | tr '\n' ' ')..."

  say "== $kind: make uninstall PREFIX=$prefix"
  mk uninstall PREFIX="$prefix" | tail -1
  left=$(leftovers "$prefix" "${planted[@]}")
  [ -z "$left" ] || fail "make uninstall left behind: $left"
  for p in "${planted[@]}"; do
    [ -e "$prefix/$p" ] || fail "make uninstall removed $p, which was not its own"
  done
  say "ok: the prefix holds what it held before the install${planted:+ (${planted[*]})}"
done

say "== DESTDIR staging, and an install over an install"
stage=$tmp/stage
mk install DESTDIR="$stage" PREFIX=/opt/handgrad SHARED=0 > /dev/null
grep -q '^prefix=/opt/handgrad$' "$stage/opt/handgrad/lib/pkgconfig/handgrad.pc" ||
  fail "DESTDIR: handgrad.pc's prefix is not PREFIX"
! grep -q "$stage" "$stage/opt/handgrad/share/handgrad/install_manifest.txt" ||
  fail "DESTDIR: the manifest names the staging directory"
mk uninstall DESTDIR="$stage" PREFIX=/opt/handgrad > /dev/null
[ -z "$(leftovers "$stage")" ] || fail "DESTDIR: uninstall left behind: $(leftovers "$stage")"
again=$tmp/again
mkdir -p "$again"
mk install PREFIX="$again" SHARED=0 > /dev/null
mk install PREFIX="$again" > /dev/null  # the second with the shared library as well
[ -e "$again/lib/libhandgrad.so" ] || fail "the second install has no libhandgrad.so"
mk uninstall PREFIX="$again" > /dev/null
[ -z "$(leftovers "$again")" ] || fail "installed twice, uninstalled, left: $(leftovers "$again")"
say "ok: staged under DESTDIR and removed; installed twice, uninstalled once: nothing left"
say "passed"
