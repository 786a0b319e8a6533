#!/usr/bin/env bash
# llmc_check.sh — handgrad checked by llm.c's own C code (make llmc-check LLMC=PATH).
#
#   tools/llmc_check.sh PATH/TO/llm.c       a checkout of github.com/karpathy/llm.c
#
# 1. llm.c's test_gpt2.c, compiled from the checkout, reads a model handgrad wrote
#    (gpt2_124M.bin) and a debug state handgrad computed (gpt2_124M_debug_state.bin: a batch,
#    handgrad's logits, loss and every gradient) and compares its own forward and backward with
#    them; then it takes 10 AdamW steps and compares its losses with 10 numbers in its source,
#    which here are handgrad's own 10 steps (a copy of test_gpt2.c with them put in). Two
#    models: a small GPT-2 (V 50257, maxT 64, L 2, NH 4, C 64) trained 20 iterations by
#    build/train, so that no bias is zero, and GPT-2 small's shape (maxT 1024, L 12, NH 12,
#    C 768) as initialised. test_gpt2 exits 0 whatever it finds, so this script reads its
#    output: "OK (LOGITS)", "LOSS OK", 16 × "TENSOR OK", "overall okay: 1", or it fails.
# 2. Round trip: llm.c's train_gpt2.c (a copy that also writes its model when it stops) trains
#    the small model 10 steps on tiny Shakespeare; handgrad reads the model it wrote and
#    computes the validation loss llm.c printed, on the same 5 batches.
#
# GPT2_SMALL=0 leaves out GPT-2 small's shape (on 2 cores its 10 steps in test_gpt2 take
# minutes). No checkout given: says so and exits 0. Anything that fails: exit 1. Needs the apps built
# (make build) and tiny Shakespeare with GPT-2's tokenizer files (make data data-gpt2).
set -euo pipefail

LLMC=${1:-${LLMC:-}}
if [ -z "$LLMC" ]; then
    echo "llmc_check: skipped: no llm.c checkout given (tools/llmc_check.sh PATH, or make llmc-check LLMC=PATH)"
    exit 0
fi
for f in test_gpt2.c train_gpt2.c llmc/utils.h llmc/dataloader.h; do
    [ -f "$LLMC/$f" ] || { echo "error: $LLMC is not an llm.c checkout (no $f)" >&2; exit 1; }
done
LLMC=$(cd "$LLMC" && pwd)
BIN=${HANDGRAD_BIN:-build}
DATA=${DATA:-data/tinyshakespeare/input.txt}
CC=${CC:-cc}
for app in train llmc tokenize; do
    [ -x "$BIN/$app" ] || { echo "error: $BIN/$app is missing (make build)" >&2; exit 1; }
done
[ -f "$DATA" ] || { echo "error: $DATA is missing (make data)" >&2; exit 1; }
work=$(mktemp -d /tmp/llmc_check.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "llmc_check: FAILED: $*" >&2; exit 1; }

# GPT-2's tokens of tiny Shakespeare: the first 32768 are the validation split (as llm.c's own
# preparation of this text), the rest the training split.
"$BIN/tokenize" --tokenizer=gpt2 < "$DATA" | tr ' ' '\n' > "$work/ids.txt"
head -n 32768 "$work/ids.txt" > "$work/val_ids.txt"
tail -n +32769 "$work/ids.txt" > "$work/train_ids.txt"

# test_gpt2 on one model: $1 a name, $2 the model file. It runs in a directory of its own,
# where it finds the two files by their fixed names.
check_model() {
    local name=$1 dir=$work/$1
    "$BIN/llmc" debug-state --model="$dir/gpt2_124M.bin" --out="$dir/gpt2_124M_debug_state.bin" \
        --ids="$work/val_ids.txt" --batch_size=4 --block_size=64 --steps=10 > "$dir/handgrad.log"
    cat "$dir/handgrad.log"
    # handgrad's 10 losses in place of the ones test_gpt2.c holds for OpenAI's weights.
    local losses
    losses=$(sed -n 's/^steps: //p' "$dir/handgrad.log" | sed 's/ /f, /g; s/$/f/')
    [ -n "$losses" ] || fail "$name: no step losses from build/llmc"
    sed "/float expected_losses\[10\] = {/,/};/c\\    float expected_losses[10] = { $losses };" \
        "$LLMC/test_gpt2.c" > "$dir/test_gpt2.c"
    grep -q "expected_losses\[10\] = { " "$dir/test_gpt2.c" || fail "$name: could not put the losses into test_gpt2.c"
    # llm.c's C, without its Makefile's -Ofast: IEEE arithmetic, as handgrad's (docs/design.md).
    $CC -O3 -fopenmp -I"$LLMC" -o "$dir/test_gpt2" "$dir/test_gpt2.c" -lm
    (cd "$dir" && ./test_gpt2) > "$dir/test_gpt2.log" || fail "$name: test_gpt2 exited with $?"
    local log=$dir/test_gpt2.log
    echo "== $name: llm.c's test_gpt2"
    grep -E "^(max_seq_len|vocab_size|padded_vocab_size|num_layers|num_heads|channels|num_parameters):" "$log" | paste -sd' '
    grep -E "OK \(LOGITS\)|^LOSS|^step|^overall" "$log"
    paste -d' ' <(grep -E "^d[a-z0-9]+$" "$log") <(grep -E "^TENSOR" "$log")
    grep -q "^OK (LOGITS)" "$log" || fail "$name: logits"
    grep -q "^LOSS OK" "$log" || fail "$name: loss"
    [ "$(grep -c '^TENSOR OK' "$log")" -eq 16 ] || fail "$name: not every gradient tensor OK"
    grep -q "^overall okay: 1" "$log" || fail "$name: test_gpt2's overall verdict"
}

# 1a. The small GPT-2, trained a little by handgrad, exported.
small="--preset=gpt2 --gelu=tanh --n_layer=2 --n_head=4 --n_embd=64 --block_size=64"
mkdir -p "$work/small"
"$BIN/train" $small --tokenizer=gpt2 --data="$DATA" --out_dir="$work/small/run" --batch_size=4 \
    --max_iters=20 --eval_interval=20 --eval_iters=1 --log_interval=10 --threads=2 > "$work/small/train.log"
"$BIN/llmc" export --ckpt="$work/small/run/ckpt.safetensors" --out="$work/small/gpt2_124M.bin"
check_model small

# 1b. GPT-2 small's shape, as initialised.
if [ "${GPT2_SMALL:-1}" != 0 ]; then
    mkdir -p "$work/gpt2"
    "$BIN/llmc" export --preset=gpt2 --gelu=tanh --seed=1337 --out="$work/gpt2/gpt2_124M.bin"
    check_model gpt2
    rm -f "$work/gpt2/"*.bin
fi

# 2. Round trip. llm.c's token files (256 int32: 20240520, 1, the count; then uint16 tokens),
# written from the same ids.
rt=$work/roundtrip
mkdir -p "$rt/dev/data/tinyshakespeare"
python3 - "$work" "$rt/dev/data/tinyshakespeare" <<'EOF'
import struct, sys
work, out = sys.argv[1], sys.argv[2]
for split in ("train", "val"):
    ids = [int(t) for t in open(f"{work}/{split}_ids.txt")]
    with open(f"{out}/tiny_shakespeare_{split}.bin", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)))
        f.write(struct.pack(f"<{len(ids)}H", *ids))
EOF
cp "$work/small/gpt2_124M.bin" "$rt/"
# train_gpt2.c as it is, but for 10 steps instead of 40, and writing its model (in llm.c's
# own float32 format) right after the validation loss it prints at step 10.
python3 - "$LLMC/train_gpt2.c" "$rt/train_gpt2.c" <<'EOF'
import sys
src = open(sys.argv[1]).read()
write = '''
static void write_model_file(GPT2* m, const char* path) {
    int h[256] = {20240326, 3, m->config.max_seq_len, m->config.vocab_size, m->config.num_layers,
                  m->config.num_heads, m->config.channels, m->config.padded_vocab_size};
    FILE* f = fopenCheck(path, "wb");
    fwriteCheck(h, sizeof(int), 256, f);
    fwriteCheck(m->params_memory, sizeof(float), m->num_parameters, f);
    fcloseCheck(f);
}
'''
edits = [("int main() {", write + "int main() {"),
         ("step <= 40;", "step <= 10;"),
         ('printf("val loss %f\\n", val_loss);',
          'printf("val loss %f\\n", val_loss);\n            '
          'if (step == 10) { write_model_file(&model, "trained.bin"); break; }')]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
open(sys.argv[2], "w").write(src)
EOF
$CC -O3 -fopenmp -I"$LLMC" -o "$rt/train_gpt2" "$rt/train_gpt2.c" -lm
(cd "$rt" && ./train_gpt2) > "$rt/train.log" || fail "round trip: train_gpt2 exited with $?"
echo "== round trip: llm.c's train_gpt2, 10 steps"
grep -E "^(val loss|step)" "$rt/train.log"
[ -f "$rt/trained.bin" ] || fail "round trip: train_gpt2 wrote no model"
llmc_before=$(grep "^val loss" "$rt/train.log" | sed -n 1p | awk '{print $3}')
llmc_after=$(grep "^val loss" "$rt/train.log" | sed -n 2p | awk '{print $3}')
hg_loss() { "$BIN/llmc" loss --model="$1" --ids="$work/val_ids.txt" --batch_size=4 --block_size=64 --batches=5 |
            sed -n 's/^mean loss \([0-9.]*\).*/\1/p'; }
hg_before=$(hg_loss "$rt/gpt2_124M.bin")
hg_after=$(hg_loss "$rt/trained.bin")
"$BIN/llmc" import --model="$rt/trained.bin" --out="$rt/trained.safetensors" > /dev/null
echo "validation loss (5 batches of 4 × 64): before training llm.c $llmc_before, handgrad $hg_before;" \
     "after 10 steps llm.c $llmc_after, handgrad $hg_after (reading llm.c's file)"
python3 -c "import sys; a = [float(x) for x in sys.argv[1:]]; sys.exit(0 if abs(a[0]-a[1]) < 1e-4 and abs(a[2]-a[3]) < 1e-4 and a[2] < a[0] else 1)" \
    "$llmc_before" "$hg_before" "$llmc_after" "$hg_after" || fail "round trip: the losses differ"
echo "llmc_check: OK"
