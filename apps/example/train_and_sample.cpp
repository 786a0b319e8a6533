// train_and_sample.cpp — handgrad used as a library: a small GPT trained on a text, saved, sampled.
//
//   c++ train_and_sample.cpp $(pkg-config --cflags --libs handgrad) -o train_and_sample
//   ./train_and_sample [--data=FILE] [--out=example.safetensors]    (default: a sonnet, built in)
//
// It lives in apps/example/, beside the apps but outside the in-tree build (lib/, apps/*.cpp and
// tests/ compile against the source tree with -I.; this folder is not among them), and includes
// only installed <handgrad/...> headers: it is written as
// a program of one's own is written, and `make example-check` builds it the way such a program
// is built, from an installed copy with pkg-config alone (docs/library.md).
#include <handgrad/checkpoint/checkpoint.h>
#include <handgrad/data/dataset.h>
#include <handgrad/model/generate.h>
#include <handgrad/text/char_tokenizer.h>
#include <handgrad/text/text_file.h>
#include <handgrad/train/trainer.h>

#include <cstdio>
#include <string>
#include <vector>

static const char* kSonnet =  // Shakespeare, Sonnet 18 (1609)
    "Shall I compare thee to a summer's day?\n"
    "Thou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\n"
    "And summer's lease hath all too short a date;\n"
    "Sometime too hot the eye of heaven shines,\n"
    "And often is his gold complexion dimm'd;\n"
    "And every fair from fair sometime declines,\n"
    "By chance or nature's changing course untrimm'd;\n"
    "But thy eternal summer shall not fade,\n"
    "Nor lose possession of that fair thou ow'st;\n"
    "Nor shall death brag thou wander'st in his shade,\n"
    "When in eternal lines to time thou grow'st:\n"
    "So long as men can breathe or eyes can see,\n"
    "So long lives this, and this gives life to thee.\n";

int main(int argc, char** argv) try {
    std::string text = kSonnet, out = "example.safetensors";
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg.rfind("--data=", 0) == 0) text = hg::read_text_file(arg.substr(7));
        else if (arg.rfind("--out=", 0) == 0) out = arg.substr(6);
        else hg::fail("unknown argument '{}' (--data=FILE, --out=PATH)", arg);
    }
    const hg::Tokenizer tok = hg::Tokenizer::from_text(text);  // one token per character
    const hg::Split split = hg::split_text(text, tok);  // 90 % of the characters train, 10 % val

    hg::GPTConfig config = hg::preset("course");  // then smaller: 2 blocks, 4 heads, 64 channels
    config.vocab_size = tok.size(), config.n_layer = 2, config.n_embd = 64, config.block_size = 32;
    hg::TrainConfig train;  // batches of 16, 300 steps; lr: 30 steps up to 3e-3, cosine to 3e-4
    train.batch_size = 16, train.max_iters = 300, train.schedule = {3e-3, 3e-4, 30, 300};

    hg::Trainer trainer;  // start() builds the model and every arena; the steps allocate nothing
    trainer.start(config, train, tok.vocab, split.train, split.val);
    std::printf("loss before training: %.4f\n", trainer.estimate_loss(split.train));  // train split
    for (int iter = 0; iter < train.max_iters; iter++) trainer.step();
    std::printf("loss after %d steps: %.4f\n", train.max_iters, trainer.estimate_loss(split.train));
    trainer.save(out);  // weights, AdamW moments, progress: build/sample reads it, resume() goes on
    std::printf("saved %s\n", out.c_str());

    // Sampling: 200 characters after the text's first. The generator keeps each layer's keys and
    // values (a KV cache): a token costs one position's forward while the text fits in block_size;
    // past it the context is cropped to the last block_size tokens and recomputed for each token.
    hg::GenerateConfig gen;  // one sample, seed 1337
    gen.temperature = 0.8f, gen.top_k = 0;
    hg::Generator sampler;
    sampler.start(trainer.model, gen, tok.encode(text.substr(0, 1)), 200);
    for (int i = 0; i < 200; i++) sampler.step();
    std::printf("sample:\n%s\n", tok.decode(sampler.sequence(0), sampler.length()).c_str());
    return 0;
} catch (const std::exception& e) {  // hg::Error: a bad argument, file or size, in one line
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
}
