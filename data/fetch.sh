#!/usr/bin/env bash
# fetch.sh OUT MD5 URL [LOCAL_FILE] — put one verified file at OUT (the data steps' common part).
#
#   1. done if OUT already exists with the right md5;
#   2. else copy LOCAL_FILE, if given and present;
#   3. else download URL with curl (into a temp file next to OUT, then moved).
# The md5 is verified whichever way the file came; a wrong file is deleted and the script fails.
set -euo pipefail

OUT="$1" MD5="$2" URL="$3" LOCAL="${4:-}"
NAME="$(basename "$OUT")"

md5_of() { md5sum "$1" | cut -d' ' -f1; }
die() { echo "fetch.sh: error: $*" >&2; exit 1; }

if [ -f "$OUT" ] && [ "$(md5_of "$OUT")" = "$MD5" ]; then
    echo "$NAME: $OUT is ready"
    exit 0
fi
rm -f "$OUT"  # absent, or present with the wrong contents

if [ -n "$LOCAL" ] && [ -f "$LOCAL" ]; then
    cp "$LOCAL" "$OUT"
    source="$LOCAL"
else
    command -v curl >/dev/null || die "no local copy${LOCAL:+ at '$LOCAL'} and curl is not installed to download $URL"
    tmp="$(mktemp "$OUT.XXXXXX")"
    trap 'rm -f "$tmp"' EXIT
    curl -fsSL --retry 3 -o "$tmp" "$URL" \
        || die "no local copy${LOCAL:+ at '$LOCAL'} and the download of $URL failed"
    mv "$tmp" "$OUT"
    source="$URL"
fi

got="$(md5_of "$OUT")"
if [ "$got" != "$MD5" ]; then
    rm -f "$OUT"
    die "$source has md5 $got, expected $MD5 (not the right $NAME, or corrupted); deleted $OUT"
fi
echo "$NAME: $OUT from $source (md5 ok)"
