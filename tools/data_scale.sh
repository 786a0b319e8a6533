#!/usr/bin/env bash
# data_scale.sh — docs/data.md's measurement: memory that does not grow with the data.
#
#   tools/data_scale.sh [MB]        (default 2000: a 2 GB corpus; needs about 4 times that on disk)
#
# 1. tools/make_corpus.py writes MB million bytes of text from tiny Shakespeare (deterministic);
# 2. build/prepare turns it into shards, with the char tokenizer and with GPT-2's: wall time,
#    tokens per second, shard count and peak RSS of each;
# 3. build/train trains the course model ITERS iterations (one thread) on those shards, on tiny
#    Shakespeare's shards, and on tiny Shakespeare as a text file (--data=FILE, all of it in
#    memory), with each tokenizer: peak RSS of each.
# Prints two markdown tables. Peak RSS is /usr/bin/time's maximum resident set size. Environment:
# WORK (default /tmp/handgrad-scale, removed at the end unless KEEP=1), HANDGRAD_BIN (build),
# DATA (tiny Shakespeare), GPT2_DIR (data/gpt2), ITERS (100), THREADS (nproc, for build/prepare).
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-2000}
WORK=${WORK:-/tmp/handgrad-scale}
BIN=${HANDGRAD_BIN:-build}
DATA=${DATA:-data/tinyshakespeare/input.txt}
GPT2_DIR=${GPT2_DIR:-data/gpt2}
ITERS=${ITERS:-100}
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
# Training: one thread, so the numbers do not depend on a second core's load.
"$BIN/prepare" --quiet --tokenizer=char --out_dir="$WORK/tiny-char" "$DATA" > /dev/null
"$BIN/prepare" --quiet --tokenizer=gpt2 --gpt2_dir="$GPT2_DIR" --out_dir="$WORK/tiny-gpt2" "$DATA" > /dev/null
TRAIN="--preset=course --batch_size=12 --block_size=64 --max_iters=$ITERS --lr_decay_iters=$ITERS --warmup_iters=$(( ITERS < 10 ? ITERS : 10 )) \
  --eval_interval=$ITERS --eval_iters=20 --log_interval=$ITERS --threads=1 --batch_threads=1 --gpt2_dir=$GPT2_DIR"
echo
echo "| --data | peak RSS | wall time | last val loss |"
echo "|---|---|---|---|"
row() {  # name, then train's data flags
  local name=$1; shift
  rm -rf "$WORK/out"
  measure "$WORK/train.log" "$BIN/train" $TRAIN --out_dir="$WORK/out" "$@"
  echo "| $name | ${RSS_MB} MB | ${SECS} s | $(grep -o 'val loss [0-9.]*' "$WORK/train.log" | tail -1) |"
}
row "tiny Shakespeare, text file (char)" --data="$DATA"
row "tiny Shakespeare, char shards" --data="$WORK/tiny-char"
row "$MB MB corpus, char shards" --data="$WORK/char"
row "tiny Shakespeare, text file (gpt2)" --data="$DATA" --tokenizer=gpt2
row "tiny Shakespeare, gpt2 shards" --data="$WORK/tiny-gpt2"
row "$MB MB corpus, gpt2 shards" --data="$WORK/gpt2"
