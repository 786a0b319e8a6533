// test_tokenize_app.cpp — build/tokenize end to end: ids out, text back byte for byte, the char
// tokenizer's two vocabulary sources, and one "error:" line for every kind of bad input.
#include "tests/catch.h"

#include <string>

#include "lib/checkpoint/checkpoint.h"
#include "lib/core/rng.h"
#include "tests/app_runner.h"
#include "tests/bpe_files.h"

using namespace hg;
using namespace hg::test;

namespace {

// build/tokenize FLAGS < stdin_text (the text goes through a file, so any bytes are fine).
Run tokenize(const TempDir& tmp, const std::string& flags, const std::string& stdin_text) {
    const std::string in = write_file(tmp.path / "stdin", stdin_text);
    return run(bin("tokenize") + " " + flags + " < " + in);
}

}  // namespace

TEST_CASE("tokenize --tokenizer=gpt2: ids, text back byte for byte, <|endoftext|>", "[bpe][apps]") {
    if (gpt2_dir().empty()) return;
    TempDir tmp("handgrad-tokenize");
    const std::string gpt2 = "--tokenizer=gpt2 --gpt2_dir=" + gpt2_dir();
    CHECK(tokenize(tmp, gpt2, "Hello world").output == "15496 995\n");
    CHECK(tokenize(tmp, gpt2, "").output == "\n");
    CHECK(tokenize(tmp, gpt2 + " --decode", "15496 995\n").output == "Hello world");
    CHECK(tokenize(tmp, gpt2 + " --decode", "  15496\n\t995  ").output == "Hello world");
    CHECK(tokenize(tmp, gpt2, "a<|endoftext|>").output == "64 27 91 437 1659 5239 91 29\n");
    CHECK(tokenize(tmp, gpt2 + " --special", "a<|endoftext|>").output == "64 50256\n");
    CHECK(tokenize(tmp, gpt2 + " --decode", "50256").output == "<|endoftext|>");

    // Random bytes (mostly invalid UTF-8) through encode and decode.
    Rng rng(7);
    std::string bytes;
    for (int i = 0; i < 5000; i++) bytes += char(rng.below(256));
    const std::string in = write_file(tmp.path / "bytes", bytes), out = (tmp.path / "back").string();
    const Run r = run(bin("tokenize") + " " + gpt2 + " < " + in + " | " + bin("tokenize") + " " + gpt2 +
                      " --decode > " + out);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(read_bytes(out) == bytes);
}

TEST_CASE("tokenize --tokenizer=char: the vocabulary of --data or of --ckpt", "[bpe][apps]") {
    TempDir tmp("handgrad-tokenize");
    const std::string data = write_file(tmp.path / "data.txt", "hello world\n");  // \n, space, d, e, h, l, o, r, w
    CHECK(tokenize(tmp, "--tokenizer=char --data=" + data, "hello").output == "4 3 5 5 6\n");
    CHECK(tokenize(tmp, "--tokenizer=char --data=" + data + " --decode", "4 3 5 5 6").output == "hello");

    // A checkpoint's vocabulary: a tiny model saved with the same eight characters.
    GPTConfig c = preset("course");
    c.vocab_size = 9, c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 8;
    GPT<float> m;
    gpt_build(m, c, 1, 8);
    gpt_init(m, 1);
    const std::string ckpt = (tmp.path / "ckpt.safetensors").string();
    save_checkpoint(ckpt, m, {"\n", " ", "d", "e", "h", "l", "o", "r", "w"}, TrainProgress{}, nullptr, nullptr);
    CHECK(tokenize(tmp, "--tokenizer=char --ckpt=" + ckpt, "hello").output == "4 3 5 5 6\n");
    CHECK(tokenize(tmp, "--tokenizer=char --ckpt=" + ckpt + " --decode", "8 6 7 5 2 0").output == "world\n");
    expect_error(tokenize(tmp, "--tokenizer=char --ckpt=" + ckpt, "hex"), "'x' (U+0078)");
    expect_error(tokenize(tmp, "--tokenizer=char --ckpt=" + ckpt + " --decode", "1 9"),
                 "token id 9 at position 1 is outside the vocabulary [0, 9)");
}

TEST_CASE("tokenize: bad flags, bad ids and missing files are one error line", "[bpe][apps][errors]") {
    TempDir tmp("handgrad-tokenize");
    const std::string data = write_file(tmp.path / "data.txt", "abc");
    expect_error(tokenize(tmp, "", "x"), "--tokenizer");
    expect_error(tokenize(tmp, "--tokenizer=bpe", "x"), "unknown tokenizer 'bpe' (char | gpt2)");
    expect_error(tokenize(tmp, "--tokenizer=char", "x"), "needs exactly one of --ckpt=PATH");
    expect_error(tokenize(tmp, "--tokenizer=char --data=" + data + " --ckpt=" + data, "x"), "exactly one of");
    expect_error(tokenize(tmp, "--tokenizer=char --data=" + data + " --special", "x"), "--special is for");
    expect_error(tokenize(tmp, "--tokenizer=char --data=" + (tmp.path / "none.txt").string(), "x"), "none.txt");
    expect_error(tokenize(tmp, "--tokenizer=char --ckpt=" + data, "x"), "data.txt");
    expect_error(tokenize(tmp, "--tokenizer=char --data=" + data + " --decode", "0 1 x2"),
                 "'x2' at position 2 is not a token id (an integer)");
    expect_error(tokenize(tmp, "--tokenizer=char --data=" + data + " --decode", "1.5"), "'1.5' at position 0");
    expect_error(tokenize(tmp, "--tokenizer=char --data=" + data + " --decode", "-1"), "token id -1 at position 0");
    expect_error(tokenize(tmp, "--tokenizer=char --data=" + data + " --decode", "99999999999999999999"),
                 "token id 99999999999999999999 at position 0 is outside the vocabulary [0, 3)");
    expect_error(tokenize(tmp, "--tokenizer=gpt2 --gpt2_dir=" + (tmp.path / "nope").string(), "x"),
                 "nope/encoder.json");
    expect_error(tokenize(tmp, "--tokenizer=gpt2 --data=" + data, "x"),
                 "--tokenizer=gpt2 takes its files from --gpt2_dir");
    if (gpt2_dir().empty()) return;
    expect_error(tokenize(tmp, "--tokenizer=gpt2 --gpt2_dir=" + gpt2_dir() + " --decode", "50257"),
                 "token id 50257 at position 0 is outside the vocabulary [0, 50257)");
}
