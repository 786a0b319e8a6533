#!/usr/bin/env bash
# prepare.sh [LOCAL_FILE] — put tiny Shakespeare (1,115,394 bytes) at data/tinyshakespeare/input.txt:
# kept if its md5 is right, else copied from LOCAL_FILE if present (the Makefile passes
# ../shared/data/tinyshakespeare.txt), else downloaded from Karpathy's char-rnn repository;
# verified either way (data/fetch.sh).
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$DIR/../fetch.sh" "$DIR/input.txt" 6fb458f1232090904fb40fe944165e91 \
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt" "${1:-}"
