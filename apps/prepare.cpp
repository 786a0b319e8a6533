// prepare — text of any size into token files for build/train --data=DIR, streaming.
//
//   build/prepare --tokenizer=gpt2 --out_dir=data/mytext texts/           # every file under texts/
//   build/prepare --tokenizer=char --out_dir=data/shakespeare data/tinyshakespeare/input.txt
//   cat *.txt | build/prepare --tokenizer=gpt2 --val_chars=1000000 --out_dir=DIR -
//   build/prepare --format=nanogpt ...                                     # nanoGPT's train.bin / val.bin
//
// Writes llm.c's shards (DIR/data_train_000000.bin, ..., DIR/data_val_000000.bin) and
// DIR/tokenizer.json; prints a progress line (bytes, tokens, MB/s, ETA) on stderr while it
// works and a summary at the end. What it reads, how it cuts and splits, and its memory bound:
// lib/data/prepare.h.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "apps/flags.h"
#include "lib/data/prepare.h"

using namespace hg;

static std::string megabytes(double bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

int main(int argc, char** argv) {
    CLI::App app{"handgrad prepare: text files (or - for stdin) into llm.c token shards, streaming"};
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    PrepareOptions opt;
    bool quiet = false;
    TokenizerFlags tokenizer;
    tokenizer.add(app, "gpt2");
    app.add_option("inputs", opt.inputs, "files, directories (every file under them), or - for standard input")
        ->required();
    app.add_option("--out_dir", opt.out_dir, "where the token files go (made if missing)")->required();
    app.add_option("--vocab", opt.vocab, "char: the vocabulary from this tokenizer.json, instead of a first pass");
    app.add_option("--train_fraction", opt.train_fraction,
                   "the first this much of the characters is train, the rest val (as train --data=FILE)")
        ->capture_default_str();
    app.add_option("--val_chars", opt.val_chars, "instead: the first N characters are val, the rest train (no "
                   "first pass: standard input needs it)");
    app.add_option("--format", opt.format, "llm.c (shards) | nanogpt (train.bin, val.bin)")->capture_default_str();
    app.add_option("--prefix", opt.prefix, "shard names: PREFIX_train_NNNNNN.bin")->capture_default_str();
    app.add_option("--shard_tokens", opt.shard_tokens, "tokens per shard")->capture_default_str();
    app.add_option("--chunk_bytes", opt.chunk_bytes, "bytes per piece encoded at once (the output depends on it, "
                   "never on --threads)")->capture_default_str();
    app.add_option("--batch_pieces", opt.batch_pieces, "pieces encoded side by side: the most threads that work, "
                   "and what the memory bound counts (never --threads)")->capture_default_str();
    app.add_option("--threads", opt.threads, "encoding threads (default: OMP_NUM_THREADS, else the cores)");
    app.add_flag("--quiet", quiet, "no progress line");
    return run_app(app, argc, argv, [&] {
        check_threads(opt.threads, /*zero_is_default=*/true);
        opt.tokenizer = tokenizer.name.empty() ? "gpt2" : tokenizer.name;
        opt.gpt2_dir = tokenizer.gpt2_dir;
        const bool tty = isatty(fileno(stderr));
        auto last = std::chrono::steady_clock::now() - std::chrono::seconds(10);
        auto progress = [&](const PrepareProgress& p) {
            const auto now = std::chrono::steady_clock::now();
            if (quiet || now - last < std::chrono::seconds(tty ? 1 : 10)) return;
            last = now;
            const double rate = p.seconds > 0 ? double(p.bytes) / p.seconds : 0;
            const std::string of = p.total_bytes ? " of " + megabytes(double(p.total_bytes)) : "";
            const std::string eta =
                p.total_bytes && rate > 0
                    ? fmt::format(", ETA {:.0f} s", double(p.total_bytes - std::min(p.bytes, p.total_bytes)) / rate)
                    : "";
            const std::string tokens = p.first_pass ? "first pass (counting characters)"
                                                    : fmt::format("{} tokens", p.tokens);
            std::fprintf(stderr, "%s%s%s, %s, %.1f MB/s%s%s", tty ? "\r" : "", megabytes(double(p.bytes)).c_str(),
                         of.c_str(), tokens.c_str(), rate / 1e6, eta.c_str(), tty ? "   " : "\n");
        };
        const PrepareResult r = prepare_data(opt, progress);
        if (tty && !quiet) std::fprintf(stderr, "\n");
        const double tokens = double(r.train_tokens + r.val_tokens);
        fmt::print("{} bytes, {} characters -> {} train + {} val tokens of the {} tokenizer in {} file{}, {}\n",
                   r.bytes, r.characters, r.train_tokens, r.val_tokens, r.tokenizer.describe(), r.files.size(),
                   r.files.size() == 1 ? "" : "s", opt.out_dir);
        fmt::print("{:.1f} s ({:.1f} s first pass): {:.0f} tokens/s, {:.1f} MB/s\n", r.seconds, r.first_pass_seconds,
                   tokens / r.seconds, double(r.bytes) / r.seconds / 1e6);
        return 0;
    });
}
