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

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/checkpoint/atomic_file.h"
#include "lib/core/errors.h"
#include "lib/model/config.h"
#include "lib/train/train_config.h"

namespace hg {

inline void add_config_option(CLI::App& app) {
    app.set_config("--config", "", "a TOML file of flags (name = value), such as a run's out_dir/run.toml; "
                   "flags on the command line override it");
    app.allow_config_extras(false);  // an unknown key is an error, not ignored
}

// The --config file's path in argv ("" when there is none).
inline std::string config_path_in_args(int argc, char** argv) {
    std::string path;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a.rfind("--config=", 0) == 0) path = a.substr(9);
        if (a == "--config" && i + 1 < argc) path = argv[i + 1];
    }
    return path;
}

// The value of `key` in the --config file named in argv ("" when there is none, or no such key),
// for a flag whose value is needed before the parse (train's --preset sets other defaults). A
// file that cannot be read is left to the parse, which reports it.
inline std::string config_file_value(int argc, char** argv, const std::string& key) {
    const std::string path = config_path_in_args(argc, argv);
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

// Checks every key of the --config file `path` against `app` before the parse, with CLI11's
// public API only: a key must name a flag (or, under a [section], a subcommand's flag) that a
// file may set. hg::Error "--config=PATH: unknown key 'KEY'" (or "... not allowed in a
// configuration file") otherwise. A file that cannot be read is left to the parse, which
// reports it. (The items named "++" and "--" are CLI11's marks for where a section opens and
// closes; no flag has those names.)
inline void check_config_keys(const CLI::App& app, const std::string& path) {
    std::vector<CLI::ConfigItem> items;
    try {
        items = CLI::ConfigTOML().from_file(path);
    } catch (const CLI::Error&) {
        return;
    }
    for (const CLI::ConfigItem& item : items) {
        const CLI::App* scope = &app;
        for (const std::string& section : item.parents) {
            const auto found = scope->get_subcommands([&](const CLI::App* s) { return s->get_name() == section; });
            check(!found.empty(), "--config={}: unknown key '{}'", path, item.fullname());
            scope = found.front();
        }
        if (item.name == "++" || item.name == "--") continue;
        const CLI::Option* op = scope->get_option_no_throw("--" + item.name);
        if (!op && item.name.size() == 1) op = scope->get_option_no_throw("-" + item.name);
        if (!op) op = scope->get_option_no_throw(item.name);
        check(op != nullptr, "--config={}: unknown key '{}'", path, item.fullname());
        check(op->get_configurable(), "--config={}: '{}' is not allowed in a configuration file", path,
              item.fullname());
    }
}

// One line for any other error in the --config file: which file, and CLI11's words.
inline std::string config_error(const CLI::App& app, const std::string& what) {
    const std::string path = app.get_config_ptr() ? app.get_config_ptr()->as<std::string>() : "";
    return fmt::format("--config={}: {}", path, what);
}

// A value as a TOML file holds it, read back as the same text by CLI11 (Debian 12's 2.1 and
// Debian 13's 2.4): true, false and numbers bare; other text between double quotes when it holds
// neither a double quote nor a backslash (2.4 reads escapes there, 2.1 does not), else between
// single quotes (no escapes in either). Text with a line break, or with a single quote and one
// of the other two, has no such form: hg::Error.
inline std::string toml_value(const std::string& v) {
    check(v.find_first_of("\n\r") == std::string::npos, "a flag's value has a line break: {}", v);
    if (v == "true" || v == "false") return v;
    char* end = nullptr;
    const bool number = !v.empty() && (std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-' ||
                                       v[0] == '+' || v[0] == '.') &&
                        v.find_first_of("xX") == std::string::npos && (std::strtod(v.c_str(), &end), *end == 0);
    if (number) return v;
    if (v.find_first_of("\"\\") == std::string::npos) return '"' + v + '"';
    check(v.find('\'') == std::string::npos, "a flag's value holds both ' and \" or \\: {}", v);
    return "'" + v + "'";
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
        text += name + " = " + toml_value(value) + "\n";
    }
    write_file_atomically(path, {{text.data(), text.size()}});
}

}  // namespace hg
