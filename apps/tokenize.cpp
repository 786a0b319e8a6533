// tokenize — text on stdin to token ids on stdout (one line, space-separated), or back with
// --decode, so handgrad's tokenizers can be compared with any other.
//
//   build/tokenize --tokenizer=gpt2 < input.txt                  GPT-2's BPE (data/gpt2, `make data-gpt2`)
//   echo 15496 995 | build/tokenize --tokenizer=gpt2 --decode    "Hello world"
//   build/tokenize --tokenizer=char --ckpt=out-shakespeare-char/ckpt.safetensors < input.txt
//   build/tokenize --tokenizer=char --data=data/tinyshakespeare/input.txt < input.txt
//
// --decode writes exactly the bytes the ids stand for (no newline added), so
// `tokenize | tokenize --decode` gives back the input byte for byte.
#include <charconv>
#include <cstdio>
#include <memory>

#include "apps/flags.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/text/bpe.h"
#include "lib/text/char_tokenizer.h"
#include "lib/text/text_file.h"
#include "lib/text/tokenizer.h"
#include "lib/text/tokenizer_by_name.h"

using namespace hg;

int main(int argc, char** argv) {
    CLI::App app{
        "handgrad tokenize: text on stdin -> token ids (one line, space-separated), or ids -> text with --decode.\n"
        "--tokenizer=gpt2 reads GPT-2's encoder.json and vocab.bpe from --gpt2_dir. --tokenizer=char has the\n"
        "vocabulary of a checkpoint (--ckpt) or the distinct characters of a text file (--data), one of the two."};
    std::string name, ckpt, data, gpt2_dir = kGpt2Dir;
    bool decode = false, special = false;
    app.add_option("--tokenizer", name, "char | gpt2")->required();
    app.add_flag("--decode", decode, "read ids, write the text");
    app.add_option("--ckpt", ckpt, "char: the vocabulary of this checkpoint");
    app.add_option("--data", data, "char: the distinct characters of this text file");
    app.add_option("--gpt2_dir", gpt2_dir, "gpt2: the directory with encoder.json and vocab.bpe")
        ->capture_default_str();
    app.add_flag("--special", special, "gpt2: \"<|endoftext|>\" in the text is id 50256 (else it is ordinary text)");
    return run_app(app, argc, argv, [&] {
        check_tokenizer_name(name);
        std::vector<std::string> vocab;
        if (name == "char") {
            check(ckpt.empty() != data.empty(),
                  "--tokenizer=char needs exactly one of --ckpt=PATH (a checkpoint's vocabulary) and --data=PATH "
                  "(the distinct characters of a text file)");
            check(!special, "--special is for --tokenizer=gpt2: the char tokenizer has no special tokens");
            vocab = ckpt.empty() ? Tokenizer::from_text(read_text_file(data)).vocab : Checkpoint::load(ckpt).vocab;
        } else {
            check(ckpt.empty() && data.empty(), "--ckpt and --data give the char tokenizer's vocabulary; "
                                                "--tokenizer=gpt2 takes its files from --gpt2_dir");
        }
        const std::unique_ptr<TextTokenizer> tok = make_tokenizer(name, vocab, gpt2_dir);
        const std::string input = read_stdin();
        if (decode) {
            const std::vector<int> ids = parse_ids(input, tok->size());
            const std::string text = tok->decode(ids.data(), ids.size());
            std::fwrite(text.data(), 1, text.size(), stdout);
            return 0;
        }
        const std::vector<int> ids =
            special ? dynamic_cast<const Gpt2Tokenizer&>(*tok).encode_with_special(input) : tok->encode(input);
        std::string line;
        line.reserve(6 * ids.size() + 1);
        for (size_t i = 0; i < ids.size(); i++) {
            char buf[16];
            if (i > 0) line += ' ';
            line.append(buf, std::to_chars(buf, buf + sizeof buf, ids[i]).ptr);
        }
        line += '\n';
        std::fwrite(line.data(), 1, line.size(), stdout);
        return 0;
    });
}
