// targets.h — what each fuzzer checks about one input, shared by the libFuzzer harnesses
// (tests/fuzz/fuzz_*.cpp, `make fuzz`) and the Catch2 suite, which replays every seed and every
// input that once broke something (tests/test_fuzz_regressions.cpp).
//
// Each target returns normally when the library accepted the input and kept its promises, or
// refused it with hg::Error (or, for flags, CLI::ParseError). A broken promise throws
// PropertyBroken; any other exception escapes, and the harness turns both into a crash.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/data/dataset.h"
#include "lib/data/shards.h"
#include "lib/checkpoint/llmc_model.h"
#include "lib/model/sample.h"
#include "lib/optim/schedule.h"
#include "lib/text/bpe.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/utf8.h"
#include "lib/train/batch_threads.h"
#include "lib/train/train_config.h"

namespace hg::fuzz {

struct PropertyBroken : std::logic_error {
    using std::logic_error::logic_error;
};

inline void promise(bool kept, const char* what) {
    if (!kept) throw PropertyBroken(what);
}

// Any bytes as a checkpoint file: Checkpoint::load (the safetensors reader and the checkpoint
// validator) returns a checkpoint whose every tensor lies inside the file, or throws hg::Error;
// the weights (and moments) then read into a model built from its config.
inline void checkpoint_bytes(const uint8_t* data, size_t size) {
    // The bytes as a file without touching the disk: a memfd, opened through its /proc path.
    static const int fd = memfd_create("fuzz-checkpoint", 0);
    promise(fd >= 0 && ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == ssize_t(size), "memfd");
    try {
        const Checkpoint ck = Checkpoint::load("/proc/self/fd/" + std::to_string(fd));
        size_t bytes = 0;
        for (const std::string& name : ck.file.names()) {
            const auto& e = ck.file.get(name);
            promise(e.end >= e.begin && e.end - e.begin == e.nbytes(), "tensor range");
            volatile uint8_t sum = 0;  // ASan sees any byte outside the buffer
            for (size_t i = 0; i < e.nbytes(); i++) sum = uint8_t(sum + e.data[i]);
            bytes += e.nbytes();
        }
        promise(bytes <= size, "tensors larger than the file");
        // A model for the weights: its arenas stay small (the file bounds the weights, not a
        // sinusoidal position table).
        const GPTConfig& c = ck.config;
        if (double(c.block_size) * c.n_embd < 1e6) {
            GPT<float> model;
            gpt_build(model, c, 1, 1);
            ck.read_weights(model);
            if (ck.has_optimizer) {
                std::vector<float> m(model.num_parameters), v(model.num_parameters);
                ck.read_optimizer(model, m.data(), v.data());
            }
        }
    } catch (const Error&) {
    }
}

// Any bytes as llm.c's model file: LlmcModel::load accepts exactly a file whose size is its
// header's (1024 bytes and every parameter, 4 or 2 bytes each) or throws hg::Error; an accepted
// file's weights read into a model built from its config, where each one sits at its place in
// llm.c's order (llmc_order gives back the file's numbers, the padding rows aside).
inline void llmc_model_bytes(const uint8_t* data, size_t size) {
    static const int fd = memfd_create("fuzz-llmc", 0);
    promise(fd >= 0 && ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == ssize_t(size), "memfd");
    try {
        const LlmcModel m = LlmcModel::load("/proc/self/fd/" + std::to_string(fd));
        promise(1024 + m.params.size() * (m.version == kLlmcFloat32 ? 4 : 2) == size, "size is the header's");
        GPT<float> model;
        gpt_build(model, m.config(), 1, 1);
        m.read_weights(model);
        const std::vector<float> back = llmc_order(model.config, m.Vp, model.params);
        promise(back.size() == m.params.size(), "llm.c's order has the file's length");
        const size_t pad_begin = size_t(m.V) * m.C, pad_end = size_t(m.Vp) * m.C;
        for (size_t i = 0; i < back.size(); i++)
            if (i < pad_begin || i >= pad_end)
                promise(std::memcmp(&back[i], &m.params[i], 4) == 0, "each weight at its place");
    } catch (const Error&) {
    }
}

// Any bytes as a text for the "char" tokenizer: utf8_next walks them without reading past the
// end and re-encoding each code point gives back its bytes; the tokenizer accepts exactly the
// valid UTF-8 texts of at least two distinct characters (a vocabulary of one token predicts
// nothing), its vocabulary is in increasing code-point order, and decode(encode(text)) == text.
inline void text_bytes(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    bool valid = true;
    char32_t first = 0;
    bool two_distinct = false;
    for (size_t pos = 0; pos < text.size();) {
        char32_t cp = 0;
        const size_t n = utf8_next(text, pos, cp);
        if (n == 0) {
            valid = false;
            break;
        }
        promise(n <= 4 && pos + n <= text.size() && utf8_encode(cp) == text.substr(pos, n), "utf8_next");
        if (pos == 0) first = cp;
        two_distinct = two_distinct || cp != first;
        pos += n;
    }
    bool accepted = false;
    try {
        const Tokenizer tok = Tokenizer::from_text(text);
        accepted = true;
        for (size_t i = 1; i < tok.vocab.size(); i++) {
            char32_t a = 0, b = 0;
            utf8_next(tok.vocab[i - 1], 0, a), utf8_next(tok.vocab[i], 0, b);
            promise(a < b, "vocabulary order");
        }
        const std::vector<int> ids = tok.encode(text);
        promise(ids.size() <= text.size() && tok.decode(ids.data(), ids.size()) == text, "char round trip");
    } catch (const Error&) {
    }
    promise(accepted == (valid && two_distinct), "accepts exactly valid UTF-8 of two characters or more");
}

// Any bytes through GPT-2's BPE: every id in [0, V) and decode(encode(x)) == x, with and without
// "<|endoftext|>" as the special token.
inline void bpe_bytes(const Gpt2Tokenizer& tok, const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    for (const std::vector<int>& ids : {tok.encode(text), tok.encode_with_special(text)}) {
        for (int id : ids) promise(id >= 0 && id < tok.size(), "id out of range");
        promise(tok.decode(ids.data(), ids.size()) == text, "BPE round trip");
    }
}

// The apps' flag parsing. The input, split at newlines, is an argv: the model flags
// (apps/flags.h) and the string flags the library parses for train and sample (--lr_replans,
// --batch_threads, --lr_decay, --cooldown_frac, the sampling knobs, --threads); the config they give is
// validated. An input that starts with '{' is a checkpoint's config JSON and a train_config
// JSON instead.
inline void flag_bytes(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    if (!text.empty() && text[0] == '{') {
        try {
            const GPTConfig c = config_from_json(text);
            promise(config_to_json(config_from_json(config_to_json(c))) == config_to_json(c), "config JSON round trip");
        } catch (const Error&) {
        }
        try {
            train_config_from_json(text).validate();
        } catch (const Error&) {
        }
        return;
    }
    std::vector<std::string> args = {"fuzz"};
    for (size_t start = 0; start <= text.size();) {
        const size_t end = std::min(text.find('\n', start), text.size());
        args.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    CLI::App app{"fuzz"};
    ModelFlags model;
    model.add(app);
    std::string replans, batch_threads = "auto", decay = "cosine";
    float temperature = 0.8f;
    double cooldown_frac = 0.2;
    int top_k = 200, threads = 0;
    app.add_option("--lr_replans", replans);
    app.add_option("--cooldown_frac", cooldown_frac);
    app.add_option("--batch_threads", batch_threads);
    app.add_option("--lr_decay", decay);
    app.add_option("--temperature", temperature);
    app.add_option("--top_k", top_k);
    app.add_option("--threads", threads);
    try {
        app.parse(int(argv.size()), argv.data());
    } catch (const CLI::Error&) {
        return;
    }
    try {
        const GPTConfig c = model.config();
        promise(config_to_json(config_from_json(config_to_json(c))) == config_to_json(c), "config JSON round trip");
        TrainConfig tc = train_preset(model.preset);
        tc.schedule.decay = parse_lr_decay(decay);
        tc.schedule.cooldown_frac = cooldown_frac;
        tc.schedule.replans = parse_replans(replans);
        if (parse_batch_threads(batch_threads) > 0) tc.batch_threads = parse_batch_threads(batch_threads);
        tc.validate();
        check_sampling_knobs(temperature, top_k);
        check_threads(threads, true);
    } catch (const Error&) {
    }
}


// Any bytes as a token file: read as llm.c's shard, open_shard accepts exactly the files whose
// size is the header's 1024 bytes plus 2 per token it counts and whose header is magic,
// version 1, a positive count and zeros, and every token then reads (a read past the file's
// end would be an hg::Error) and so do windows of a view over it, cut by sample_batch; read as
// nanoGPT's .bin, every even, non-empty size is accepted; read as a tokenizer.json, the
// vocabulary of an accepted char tokenizer is a valid one.
inline void shard_bytes(const uint8_t* data, size_t size) {
    static const int fd = memfd_create("fuzz-shard", 0);
    promise(fd >= 0 && ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == ssize_t(size), "memfd");
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    auto read_all = [](const TokenFile& t) {
        std::vector<int> all(t.n);
        TokenView::of_parts({t.part()}).copy(0, t.n, all.data());
        for (int id : all) promise(id >= 0 && id < 65536, "a token outside uint16");
        const TokenView view = TokenView::of_parts({t.part(), t.part()});
        if (view.size() < 9) return;
        std::vector<int> idx(4 * 8), targets(4 * 8);
        Rng rng(size_t(t.n));
        sample_batch(idx.data(), targets.data(), view, 4, 8, rng);
        for (int id : idx) promise(id >= 0 && id < 65536, "a token outside uint16");
    };
    // The rule, independently: the header's ints as little-endian, then the size.
    auto le32 = [&](size_t i) {
        return uint32_t(data[4 * i]) | uint32_t(data[4 * i + 1]) << 8 | uint32_t(data[4 * i + 2]) << 16 |
               uint32_t(data[4 * i + 3]) << 24;
    };
    bool valid = size >= kShardHeaderBytes && le32(0) == 20240520 && le32(1) == 1 && int32_t(le32(2)) > 0 &&
                 size == kShardHeaderBytes + 2 * size_t(le32(2));
    for (size_t i = 3; valid && i < kShardHeaderInts; i++) valid = le32(i) == 0;
    bool accepted = true;
    try {
        const TokenFile t = open_shard(path);
        promise(t.n == (size - kShardHeaderBytes) / 2, "an accepted shard's count");
        read_all(t);
    } catch (const Error&) {
        accepted = false;
    }
    promise(accepted == valid, "open_shard accepts exactly the valid shards");
    try {
        const TokenFile t = open_raw_tokens(path);
        promise(size > 0 && size % 2 == 0 && t.n == size / 2, "an accepted .bin's size");
        read_all(t);
    } catch (const Error&) {
        promise(size == 0 || size % 2 == 1, "a valid .bin refused");
    }
    try {
        const DataTokenizer tok = read_tokenizer_file(path);
        if (tok.name == "char") promise(Tokenizer::from_vocab(tok.vocab).vocab == tok.vocab, "vocabulary");
        else promise(tok.name == "gpt2" && tok.vocab.empty(), "tokenizer name");
    } catch (const Error&) {
    }
}

}  // namespace hg::fuzz

// The harness of one target: LLVMFuzzerTestOneInput runs `call` (on data, size), and a broken
// promise or any exception that is not a refusal becomes a crash libFuzzer keeps the input of.
#define HG_FUZZ_TARGET(call)                                                   \
    extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
        try {                                                                  \
            call;                                                              \
        } catch (...) {                                                        \
            __builtin_trap();                                                  \
        }                                                                      \
        return 0;                                                              \
    }
