// flags.h — the command-line flags the apps share, with nanoGPT's names (--n_layer=6 ...).
//
// A --preset gives the starting config; any model flag given explicitly overrides it.
// Parsing errors end the program with one "error: ..." line and exit code 2; anything thrown
// after that (hg::Error, a std::filesystem error, running out of memory, any other exception)
// with one "error: ..." line and exit code 1 (see run_app).
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "apps/config_file.h"
#include "lib/core/errors.h"
#include "lib/model/config.h"
#include "lib/text/bpe.h"
#include "lib/train/matmul_choice.h"

namespace hg {

// The model flags. Each is applied only when given, on top of the preset.
struct ModelFlags {
    std::string preset = "course";
    GPTConfig cfg;  // receives the parsed values
    std::string bias_layout, pos, gelu, init, norm, mlp;
    bool bias = true;
    CLI::Option *o_preset, *o_vocab, *o_block, *o_layer, *o_head, *o_embd, *o_dropout, *o_bias, *o_tie;
    CLI::Option *o_rope_base, *o_qk_norm, *o_softcap, *o_zero_proj;

    void add(CLI::App& app) {
        // As nanoGPT's configurator: a flag given twice takes its last value.
        app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        o_preset = app.add_option("--preset", preset, preset_names(" | ") + " (speedrun trains in bf16 on every CPU: "
                                  "without AVX512_BF16 that is slower than speedrun-float32, its recipe in float)")
                       ->capture_default_str();
        o_vocab = app.add_option("--vocab_size", cfg.vocab_size, "V");
        o_block = app.add_option("--block_size", cfg.block_size, "context length T");
        o_layer = app.add_option("--n_layer", cfg.n_layer, "L");
        o_head = app.add_option("--n_head", cfg.n_head, "NH");
        o_embd = app.add_option("--n_embd", cfg.n_embd, "C");
        o_dropout = app.add_option("--dropout", cfg.dropout, "dropout probability");
        o_bias =
            app.add_option("--bias", bias, "nanoGPT's switch: True = biases everywhere (gpt2 layout), False = none");
        app.add_option("--bias_layout", bias_layout, "gpt2 | course | lesson14 | none");
        o_tie = app.add_option("--tie_weights", cfg.tie_weights, "share wte with lm_head");
        app.add_option("--pos", pos, "learned | sinusoidal | rope");
        o_rope_base = app.add_option("--rope_base", cfg.rope_base, "RoPE's base (default 10000)");
        app.add_option("--norm", norm, "layernorm | rmsnorm");
        app.add_option("--mlp", mlp, "gelu | swiglu | relu2");
        app.add_option("--gelu", gelu, "erf | tanh");
        // A bare --qk_norm turns it on; --qk_norm=false (or 0) off.
        o_qk_norm = app.add_flag("--qk_norm", cfg.qk_norm, "RMS-normalise each head of q and k before the scores");
        o_softcap = app.add_option("--logit_softcap", cfg.logit_softcap, "S: logits = S·tanh(z/S); 0 = off");
        app.add_option("--init", init, "gpt2 | pytorch | lesson14 | lesson14-scaled");
        o_zero_proj = app.add_flag("--init_zero_proj", cfg.init_zero_proj,
                                   "zero-initialise attn.c_proj and mlp.c_proj weights");
    }

    // The preset with every explicitly given flag applied, validated.
    GPTConfig config() const {
        GPTConfig c = hg::preset(preset);
        if (o_vocab->count()) c.vocab_size = cfg.vocab_size;
        if (o_block->count()) c.block_size = cfg.block_size;
        if (o_layer->count()) c.n_layer = cfg.n_layer;
        if (o_head->count()) c.n_head = cfg.n_head;
        if (o_embd->count()) c.n_embd = cfg.n_embd;
        if (o_dropout->count()) c.dropout = cfg.dropout;
        if (o_bias->count()) c.bias = bias ? BiasLayout::GPT2 : BiasLayout::None;
        if (!bias_layout.empty()) c.bias = parse_bias_layout(bias_layout);
        if (o_tie->count()) c.tie_weights = cfg.tie_weights;
        if (!pos.empty()) c.pos = parse_pos_encoding(pos);
        if (!gelu.empty()) c.gelu = parse_gelu(gelu);
        if (!init.empty()) c.init = parse_init(init);
        if (o_rope_base->count()) c.rope_base = cfg.rope_base;
        if (!norm.empty()) c.norm = parse_norm(norm);
        if (!mlp.empty()) c.mlp = parse_mlp(mlp);
        if (o_qk_norm->count()) c.qk_norm = cfg.qk_norm;
        if (o_softcap->count()) c.logit_softcap = cfg.logit_softcap;
        if (o_zero_proj->count()) c.init_zero_proj = cfg.init_zero_proj;
        c.validate();
        return c;
    }

    // The model of a run that starts from a checkpoint's weights (train --init_from=PATH): the
    // checkpoint's config `c`, with block_size and dropout from an explicit --preset and then
    // from their own flags. A flag that would change anything else is refused.
    GPTConfig finetune_config(GPTConfig c) const {
        const bool shape_flag = o_vocab->count() || o_layer->count() || o_head->count() || o_embd->count() ||
                                o_bias->count() || o_tie->count() || !bias_layout.empty() || !pos.empty() ||
                                !gelu.empty() || !init.empty();
        check(!shape_flag, "with --init_from=PATH the model is the checkpoint's: of the model flags only "
                           "--block_size, --dropout and --preset (for those two) apply");
        if (o_preset->count()) {
            const GPTConfig p = hg::preset(preset);
            c.block_size = p.block_size, c.dropout = p.dropout;
        }
        if (o_block->count()) c.block_size = cfg.block_size;
        if (o_dropout->count()) c.dropout = cfg.dropout;
        c.validate();
        return c;
    }
};

// --tokenizer and --gpt2_dir, for the apps that turn text into a model's ids and back.
struct TokenizerFlags {
    std::string name;                   // "" when not given: the checkpoint's (train from scratch: char)
    std::string gpt2_dir = kGpt2Dir;    // GPT-2's encoder.json and vocab.bpe (make data-gpt2)

    void add(CLI::App& app, const std::string& when_absent) {
        app.add_option("--tokenizer", name, "char | gpt2 (default: " + when_absent + ")");
        app.add_option("--gpt2_dir", gpt2_dir, "with gpt2: the directory with encoder.json and vocab.bpe")
            ->capture_default_str();
    }
};

// --matmul: which library runs the products (lib/train/matmul_choice.h), for every app that
// runs a model. apply() decides and switches to it, and returns the header line saying which
// backend runs and why.
struct MatmulFlag {
    std::string value = "auto";

    void add(CLI::App& app) {
        app.add_option(
               "--matmul", value,
               "auto | openblas | onednn | highway: what runs the products (highway: our "
               "own kernel; auto: the fastest on this model's own products, measured once per machine and remembered)")
            ->capture_default_str();
    }
    void validate() const { parse_matmul_flag(value); }
    std::string apply(const std::string& key, const std::function<std::vector<MatmulCall>()>& calls, int threads,
                      const Dist& dist = {}, std::optional<MatmulBackend> resumed = std::nullopt) const {
        const MatmulChoice c = choose_matmul(value, key, calls, threads, dist, resumed);
        matmul_use(c.backend);
        return fmt::format("matmul: {} ({})", to_string(c.backend), c.why);
    }
    // For the apps that run forward passes only: a forward of B rows of T tokens stands for their products.
    std::string apply_forward(const GPTConfig& c, int B, int T, int threads) const {
        return apply(forward_matmul_key(c, B, T, threads), [&] { return forward_matmuls(c, B, T); }, threads);
    }
};

// The value of the last --preset in argv, else in the --config file ("course" when none): train
// reads it before parsing the other flags, whose defaults depend on it. The full parse reports
// any mistake in it.
inline std::string preset_in_args(int argc, char** argv) {
    std::string name = config_file_value(argc, argv, "preset");
    if (name.empty()) name = "course";
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a.rfind("--preset=", 0) == 0) name = a.substr(9);
        if (a == "--preset" && i + 1 < argc) name = argv[i + 1];
    }
    return name;
}

// --threads: 0 (when allowed) leaves the default; more than kMaxThreads is a typo, not a machine.
constexpr int kMaxThreads = 1024;
inline void check_threads(int threads, bool zero_is_default) {
    check(threads >= (zero_is_default ? 0 : 1) && threads <= kMaxThreads, "--threads must be in [{}, {}]{} (got {})",
          zero_is_default ? 0 : 1, kMaxThreads, zero_is_default ? ", 0 for the default" : "", threads);
}

// All of standard input (the apps that read text or ids from a pipe).
inline std::string read_stdin() {
    std::string s;
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, stdin)) > 0) s.append(buf, got);
    check(!std::ferror(stdin), "cannot read stdin");
    return s;
}

// Runs an app's body: flag errors exit 2, a --config file that cannot be read or holds a key
// that is no flag (apps/config_file.h) and everything thrown by the body exit 1, each as one
// line. Nothing escapes as an uncaught exception (which would end the program with SIGABRT).
// SIGPIPE is ignored, so output into a closed pipe (`build/sample | head -1`) is a failed
// write (fmt throws; a plain fwrite leaves stdout's error flag, checked at the end), not a
// signal; a checkpoint already saved stays.
inline int run_app(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
    std::signal(SIGPIPE, SIG_IGN);
    // The error line itself is written with stdio, which never throws, even into a full disk.
    auto report = [](const char* what) { std::fprintf(stderr, "error: %s\n", what); };
    add_config_option(app);
    try {
        const std::string config = config_path_in_args(argc, argv);
        if (!config.empty()) check_config_keys(app, config);
    } catch (const Error& e) {
        report(e.what());
        return 1;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ConfigError& e) {
        report(config_error(app, e.what()).c_str());
        return 1;
    } catch (const CLI::FileError& e) {
        report(config_error(app, e.what()).c_str());
        return 1;
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        report(e.what());
        return 2;
    }
    try {
        const int status = body();
        // What is still in stdout's buffer is written now, so a write that failed (a full disk,
        // a closed pipe) is reported as an error instead of being lost at exit.
        check(std::fflush(stdout) == 0 && !std::ferror(stdout), "cannot write to standard output: {}",
              std::strerror(errno));
        return status;
    } catch (const Error& e) {
        report(e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        report("out of memory");
        return 1;
    } catch (const std::exception& e) {  // std::filesystem's errors among them: what() names the paths
        report(e.what());
        return 1;
    } catch (...) {
        report("an unknown exception");
        return 1;
    }
}

}  // namespace hg
