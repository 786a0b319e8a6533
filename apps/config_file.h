// config_file.h — a run as a file: --config=FILE for every app, and the resolved run written back.
//
// The file is TOML (INI reads too), one flag per line with the flag's own name, as CLI11 reads
// it: `n_layer = 6`, `learning_rate = 0.001`, `data = "input.txt"`; a subcommand's flags go
// under its [section]. A flag given on the command line overrides the file's value; a key that
// is no flag of the app, or a file that cannot be read, is an error (exit 1); a value the flag
// refuses is refused as on the command line (exit 2). build/train writes out_dir/run.toml, every flag of the run
// with the value it ran with, so `build/train --config=out_dir/run.toml` runs it again.
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/checkpoint/atomic_file.h"
#include "lib/model/config.h"
#include "lib/train/train_config.h"

namespace hg {

inline void add_config_option(CLI::App& app) {
    app.set_config("--config", "", "a TOML file of flags (name = value), such as a run's out_dir/run.toml; "
                   "flags on the command line override it");
    app.allow_config_extras(false);  // an unknown key is an error, not ignored
}

// The value of `key` in the --config file named in argv ("" when there is none, or no such key),
// for a flag whose value is needed before the parse (train's --preset sets other defaults). A
// file that cannot be read is left to the parse, which reports it.
inline std::string config_file_value(int argc, char** argv, const std::string& key) {
    std::string path;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a.rfind("--config=", 0) == 0) path = a.substr(9);
        if (a == "--config" && i + 1 < argc) path = argv[i + 1];
    }
    if (path.empty()) return "";
    try {
        for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_file(path))
            if (item.parents.empty() && item.name == key && !item.inputs.empty()) return item.inputs.back();
    } catch (const CLI::Error&) {
    }
    return "";
}

// The model flags (flags.h) with the values of `c`: what a run's file records of its model.
inline std::map<std::string, std::string> model_flag_values(const GPTConfig& c) {
    return {{"vocab_size", fmt::format("{}", c.vocab_size)}, {"block_size", fmt::format("{}", c.block_size)},
            {"n_layer", fmt::format("{}", c.n_layer)}, {"n_head", fmt::format("{}", c.n_head)},
            {"n_embd", fmt::format("{}", c.n_embd)}, {"dropout", fmt::format("{}", c.dropout)},
            {"bias_layout", to_string(c.bias)}, {"tie_weights", c.tie_weights ? "true" : "false"},
            {"pos", to_string(c.pos)}, {"rope_base", fmt::format("{}", c.rope_base)}, {"norm", to_string(c.norm)},
            {"mlp", to_string(c.mlp)}, {"gelu", to_string(c.gelu)}, {"qk_norm", c.qk_norm ? "true" : "false"},
            {"logit_softcap", fmt::format("{}", c.logit_softcap)}, {"init", to_string(c.init)},
            {"init_zero_proj", c.init_zero_proj ? "true" : "false"}};
}

// The training flags with the values of `c` (train_config_to_json names each by its flag).
inline std::map<std::string, std::string> train_flag_values(const TrainConfig& c) {
    std::map<std::string, std::string> values;
    const nlohmann::json j = nlohmann::json::parse(train_config_to_json(c));
    for (const auto& [name, value] : j.items())
        if (value.is_string()) values[name] = value.get<std::string>();
        // A float field (beta1 0.9f) as the float it is ("0.9", not 0.8999999761581421), which
        // reads back to the same bits.
        else if (value.is_number_float() && double(float(value.get<double>())) == value.get<double>())
            values[name] = fmt::format("{}", float(value.get<double>()));
        else values[name] = value.dump();
    return values;
}

// One line for an error in the --config file: which file, and (for a key that is no flag) which key.
inline std::string config_error(const CLI::App& app, const std::string& what) {
    const std::string path = app.get_config_ptr() ? app.get_config_ptr()->as<std::string>() : "";
    const std::string unknown = "INI was not able to parse ";
    if (what.rfind(unknown, 0) == 0) return fmt::format("--config={}: unknown key '{}'", path, what.substr(unknown.size()));
    return fmt::format("--config={}: {}", path, what);
}

// Writes every flag of `app` (atomically) as `name = value`: its value in `resolved` (what the
// run decided), else the one given (command line or file), else its default; flags in `omit`,
// and flags with none of the three, are left out.
inline void write_run_config(const CLI::App& app, const std::string& path,
                             const std::map<std::string, std::string>& resolved, const std::set<std::string>& omit) {
    std::string text = "# " + app.get_description().substr(0, app.get_description().find('\n')) +
                       ": the flags of a run; --config=THIS_FILE runs it again\n";
    for (const CLI::Option* opt : app.get_options()) {
        const std::string name = opt->get_single_name();
        if (!opt->get_configurable() || name == "help" || omit.count(name)) continue;
        std::string value;
        if (resolved.count(name)) value = resolved.at(name);
        else if (!opt->results().empty()) value = opt->results().back();
        else value = opt->get_default_str();
        if (value.empty() && !resolved.count(name)) continue;
        text += name + " = " + CLI::detail::convert_arg_for_ini(value) + "\n";
    }
    write_file_atomically(path, {{text.data(), text.size()}});
}

}  // namespace hg
