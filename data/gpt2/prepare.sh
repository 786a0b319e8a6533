#!/usr/bin/env bash
# prepare.sh [LOCAL_DIR] — put GPT-2's tokenizer files at data/gpt2/: encoder.json (the 50,257
# tokens and their ids, 1,042,301 bytes) and vocab.bpe (the 50,000 merges, 456,318 bytes), as
# OpenAI released them with GPT-2 (MIT licence). Each is kept if its md5 is right, else copied
# from LOCAL_DIR if present there (the Makefile passes ../shared/data/gpt2), else downloaded from
# OpenAI's public GPT-2 bucket; verified either way (data/fetch.sh).
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
URL="https://openaipublic.blob.core.windows.net/gpt-2/models/124M"
LOCAL="${1:-}"
fetch() { bash "$DIR/../fetch.sh" "$DIR/$1" "$2" "$URL/$1" "${LOCAL:+$LOCAL/$1}"; }
fetch encoder.json dffec25a898b1f5e569bec4dffd7e5c0
fetch vocab.bpe 75a37753dd7a28a2c5df80c28bf06e4e
