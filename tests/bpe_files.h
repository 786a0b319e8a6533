// bpe_files.h — GPT-2's tokenizer files for the tests, and small byte-level BPE files written to order.
#pragma once
#include "tests/catch.h"
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "lib/text/bpe.h"
#include "lib/text/utf8.h"
#include "tests/app_runner.h"

namespace hg::test {

// The directory with GPT-2's encoder.json and vocab.bpe (make sets HANDGRAD_GPT2), or "" and a
// warning: the tests that need the files then skip.
inline std::string gpt2_dir() {
    const char* p = std::getenv("HANDGRAD_GPT2");
    if (!p || !*p || !std::filesystem::exists(std::filesystem::path(p) / "encoder.json")) {
        WARN("HANDGRAD_GPT2 does not name a directory with GPT-2's encoder.json and vocab.bpe: skipping");
        return "";
    }
    return p;
}

// GPT-2's tokenizer, loaded once for all tests (gpt2_dir() must not be empty).
inline const Gpt2Tokenizer& gpt2() {
    static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(gpt2_dir());
    return tok;
}

// How GPT-2's files spell bytes: the printable Latin-1 bytes as themselves, the 68 others, in
// byte order, as U+0100, U+0101, ... (written out here again rather than taken from lib/).
inline std::string spell(std::string_view bytes) {
    std::string out;
    for (unsigned char b : bytes) {
        char32_t cp = b;
        if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
            cp = 0x100;
            for (int c = 0; c < b; c++)
                if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) cp++;
        }
        out += utf8_encode(cp);
    }
    return out;
}

// encoder.json and vocab.bpe in `dir` for a byte-level BPE with these merges (in rank order, as
// byte strings): ids 0..255 are the bytes, then each merge's result (the first time it is made),
// then "<|endoftext|>".
inline void write_bpe_files(const std::filesystem::path& dir,
                            const std::vector<std::pair<std::string, std::string>>& merges) {
    nlohmann::ordered_json encoder;
    for (int b = 0; b < 256; b++) encoder[spell(std::string(1, char(b)))] = b;
    std::string bpe = "#version: 0.2\n";
    for (const auto& [left, right] : merges) {
        if (!encoder.contains(spell(left + right))) encoder[spell(left + right)] = encoder.size();
        bpe += spell(left) + " " + spell(right) + "\n";
    }
    encoder["<|endoftext|>"] = encoder.size();
    write_file(dir / "encoder.json", encoder.dump());
    write_file(dir / "vocab.bpe", bpe);
}

}  // namespace hg::test
