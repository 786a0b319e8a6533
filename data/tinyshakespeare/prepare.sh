#!/usr/bin/env bash
# prepare.sh [LOCAL_FILE] — put tiny Shakespeare (1,115,394 bytes) at data/tinyshakespeare/input.txt.
#
#   1. done if input.txt already exists with the right md5;
#   2. else copy LOCAL_FILE, if given and present (the Makefile passes ../shared/data/tinyshakespeare.txt);
#   3. else download it with curl from Karpathy's char-rnn repository (into a temp file, then moved).
# The md5 is verified whichever way the file came; a wrong file is deleted and the script fails.
set -euo pipefail

URL="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
MD5="6fb458f1232090904fb40fe944165e91"
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$DIR/input.txt"
LOCAL="${1:-}"

md5_of() { md5sum "$1" | cut -d' ' -f1; }
die() { echo "prepare.sh: error: $*" >&2; exit 1; }

if [ -f "$OUT" ] && [ "$(md5_of "$OUT")" = "$MD5" ]; then
    echo "tiny Shakespeare: $OUT is ready"
    exit 0
fi
rm -f "$OUT"  # absent, or present with the wrong contents

if [ -n "$LOCAL" ] && [ -f "$LOCAL" ]; then
    cp "$LOCAL" "$OUT"
    source="$LOCAL"
else
    command -v curl >/dev/null || die "no local copy${LOCAL:+ at '$LOCAL'} and curl is not installed to download $URL"
    tmp="$(mktemp "$DIR/input.txt.XXXXXX")"
    trap 'rm -f "$tmp"' EXIT
    curl -fsSL --retry 3 -o "$tmp" "$URL" \
        || die "no local copy${LOCAL:+ at '$LOCAL'} and the download of $URL failed"
    mv "$tmp" "$OUT"
    source="$URL"
fi

got="$(md5_of "$OUT")"
if [ "$got" != "$MD5" ]; then
    rm -f "$OUT"
    die "$source has md5 $got, expected $MD5 (not tiny Shakespeare, or corrupted); deleted it"
fi
echo "tiny Shakespeare: $OUT from $source (md5 ok)"
