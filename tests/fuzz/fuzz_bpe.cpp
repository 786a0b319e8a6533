// libFuzzer harness for hg::fuzz::bpe_bytes (tests/fuzz/targets.h says what it checks), with
// GPT-2's real encoder.json and vocab.bpe from HANDGRAD_GPT2 (default data/gpt2).
#include <cstdlib>
#include <memory>

#include "tests/fuzz/targets.h"

static std::unique_ptr<hg::Gpt2Tokenizer> g_tok;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* dir = std::getenv("HANDGRAD_GPT2");
    g_tok = std::make_unique<hg::Gpt2Tokenizer>(hg::Gpt2Tokenizer::load(dir ? dir : "data/gpt2"));
    return 0;
}

HG_FUZZ_TARGET(hg::fuzz::bpe_bytes(*g_tok, data, size))
