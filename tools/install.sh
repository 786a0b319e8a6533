#!/usr/bin/env bash
# install.sh — the work of `make install` and `make uninstall`; the Makefile decides what is
# installed (the public headers, the libraries, handgrad.pc) and passes it in the environment.
#
#   install.sh install     HEADERS (lib/... paths), LIBS (built libraries), PC (a handgrad.pc)
#   install.sh uninstall
#
# Both take PREFIX (absolute) and DESTDIR (a staging root, may be empty). Every file written and
# every directory created goes into PREFIX/share/handgrad/install_manifest.txt (paths as under
# PREFIX, without DESTDIR; a directory ends in /), itself installed: uninstall removes exactly
# its files, then those of its directories that are empty now, deepest first. Installing again
# first removes the files the previous manifest lists and keeps its directories.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PREFIX:?}" "${DESTDIR=}"
root=$DESTDIR
manifest=$PREFIX/share/handgrad/install_manifest.txt
error() { echo "error: $*" >&2; exit 1; }
case $PREFIX in /*) ;; *) error "PREFIX must be an absolute path (got '$PREFIX')" ;; esac
case $DESTDIR$PREFIX in *[[:space:]]*) error "PREFIX and DESTDIR must not hold white space" ;; esac

files=() dirs=()
# Creates a directory under PREFIX as `mkdir -p` would, noting each one it creates.
need_dir() {
  [ -d "$root$1" ] && return 0
  if [ "$1" = / ]; then mkdir -p "$root"; return 0; fi
  need_dir "$(dirname "$1")"
  mkdir "$root$1"
  dirs+=("$1/")
}
# Notes a file about to be written under PREFIX, creating its directory.
place() {
  need_dir "$(dirname "$1")"
  files+=("$1")
}
# copy MODE SRC DEST
copy() {
  place "$3"
  cp "$2" "$root$3"
  chmod "$1" "$root$3"
}

case ${1:-} in
install)
  if [ -f "$root$manifest" ]; then
    while read -r f; do
      case $f in */) dirs+=("$f") ;; *) rm -f "$root$f" ;; esac
    done < "$root$manifest"
  fi
  # In the tree a header includes another as "lib/folder/x.h"; installed, it is <handgrad/folder/x.h>.
  for h in $HEADERS; do
    dst=$PREFIX/include/handgrad/${h#lib/}
    place "$dst"
    sed 's|^#include "lib/\(.*\)"|#include <handgrad/\1>|' "$h" > "$root$dst"
    chmod 644 "$root$dst"
  done
  for lib in $LIBS; do
    name=$(basename "$lib")
    case $name in
      *.a) copy 644 "$lib" "$PREFIX/lib/$name" ;;
      *.so.*)  # the library under its soname, and its link-time name beside it
        copy 755 "$lib" "$PREFIX/lib/$name"
        place "$PREFIX/lib/${name%%.so.*}.so"
        ln -sf "$name" "$root$PREFIX/lib/${name%%.so.*}.so" ;;
      *) error "install.sh: no rule for $lib" ;;
    esac
  done
  copy 644 "$PC" "$PREFIX/lib/pkgconfig/handgrad.pc"
  place "$manifest"
  printf '%s\n' "${files[@]}" "${dirs[@]}" > "$root$manifest"
  chmod 644 "$root$manifest"
  echo "installed handgrad in $root$PREFIX: ${#files[@]} files, listed in $root$manifest"
  ;;
uninstall)
  [ -f "$root$manifest" ] || error "no handgrad installed in $root$PREFIX (no $root$manifest)"
  mapfile -t listed < "$root$manifest"
  for f in "${listed[@]}"; do case $f in */) ;; *) rm -f "$root$f" ;; esac; done
  for d in $(printf '%s\n' "${listed[@]}" | grep '/$' | sort -r || true); do
    rmdir "$root$d" 2>/dev/null || echo "kept $root$d: not empty"
  done
  echo "removed handgrad from $root$PREFIX"
  ;;
*) echo "usage: PREFIX=... [DESTDIR=...] tools/install.sh install|uninstall"; exit 2 ;;
esac
