#!/usr/bin/env bash
# data_scale.sh — docs/data.md's measurement: memory that does not grow with the data.
#
#   tools/data_scale.sh [MB]        (default 2000: a 2 GB corpus; needs about 4 times that on disk)
#
# 1. tools/make_corpus.py writes MB million bytes of text from tiny Shakespeare (deterministic);
# 2. build/prepare turns it into shards, with the char tokenizer and with GPT-2's: wall time,
#    tokens per second, shard count and peak RSS of each;
# 3. build/train trains the course model ITERS iterations on those shards, and the same run on
#    tiny Shakespeare as a text file (--data=FILE, all of it in memory): peak RSS of each.
# Prints one markdown table. Peak RSS is /usr/bin/time's maximum resident set size. Environment:
# WORK (default /tmp/handgrad-scale, removed at the end unless KEEP=1), HANDGRAD_BIN (build),
# DATA (tiny Shakespeare), GPT2_DIR (data/gpt2), ITERS (200), THREADS (nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-2000}
WORK=${WORK:-/tmp/handgrad-scale}
BIN=${HANDGRAD_BIN:-build}
DATA=${DATA:-data/tinyshakespeare/input.txt}
GPT2_DIR=${GPT2_DIR:-data/gpt2}
ITERS=${ITERS:-200}
THREADS=${THREADS:-$(nproc)}
mkdir -p "$WORK"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

# measure LOG CMD...: runs CMD, its output into LOG; sets SECS and RSS_MB.
measure() {
  local log=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/time.txt" "$@" > "$log" 2>&1 || { tail -5 "$log"; exit 1; }
  read -r SECS KB < "$WORK/time.txt"
  RSS_MB=$(awk -v k="$KB" 'BEGIN { printf "%.0f", k / 1024 }')
}

python3 tools/make_corpus.py --mb "$MB" --src "$DATA" --out "$WORK/corpus.txt" > /dev/null
BYTES=$(stat -c %s "$WORK/corpus.txt")
echo "| step | input | wall time | throughput | output | peak RSS |"
echo "|---|---|---|---|---|---|"
for tok in char gpt2; do
  measure "$WORK/prepare-$tok.log" "$BIN/prepare" --quiet --threads="$THREADS" --tokenizer=$tok --gpt2_dir="$GPT2_DIR" \
    --out_dir="$WORK/$tok" "$WORK/corpus.txt"
  TOKENS=$(sed -n 's/.*-> \([0-9]*\) train + \([0-9]*\) val.*/\1 \2/p' "$WORK/prepare-$tok.log" | awk '{ print $1 + $2 }')
  SHARDS=$(ls "$WORK/$tok"/*.bin | wc -l)
  awk -v t="$tok" -v b="$BYTES" -v s="$SECS" -v n="$TOKENS" -v k="$SHARDS" -v r="$RSS_MB" 'BEGIN {
    printf "| build/prepare --tokenizer=%s | %.2f GB of text | %.0f s | %.2f M tokens/s, %.1f MB/s | %.0f M tokens in %d shards | %d MB |\n",
      t, b / 1e9, s, n / s / 1e6, b / s / 1e6, n / 1e6, k, r }'
done
TRAIN="--preset=course --batch_size=12 --block_size=64 --max_iters=$ITERS --lr_decay_iters=$ITERS --warmup_iters=10 \
  --eval_interval=$ITERS --eval_iters=20 --log_interval=$ITERS --threads=$THREADS --batch_threads=1"
row() {  # name data log [flags]
  measure "$3" "$BIN/train" $TRAIN --data="$2" --out_dir="$WORK/out-$1" ${4:-}
  local loss; loss=$(grep -o 'val loss [0-9.]*' "$3" | tail -1)
  echo "| build/train ($ITERS iterations, course model, $1) | $2 | ${SECS} s | $loss | | ${RSS_MB} MB |"
}
row "char, text" "$DATA" "$WORK/train-text.log"
row "char, shards" "$WORK/char" "$WORK/train-char.log"
row "gpt2, text" "$DATA" "$WORK/train-text-gpt2.log" "--tokenizer=gpt2 --gpt2_dir=$GPT2_DIR"
row "gpt2, shards" "$WORK/gpt2" "$WORK/train-gpt2.log" "--gpt2_dir=$GPT2_DIR"
