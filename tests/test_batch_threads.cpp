// --batch_threads (lib/train/batch_threads.h): the flag's values, the replica setting auto considers,
// the choice itself, and through the app: a run with auto is, bit for bit, the run with the
// setting it printed; bad values get one line.
#include "tests/catch.h"

#include <regex>
#include <string>
#include <vector>

#include "lib/text/char_tokenizer.h"
#include "lib/train/batch_threads.h"
#include "lib/train/startup_cache.h"
#include "lib/train/trainer.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;

static std::string breach_text() { return corpus(80, "once more unto the breach, dear friends, once more; or close the wall up.\n"); }

TEST_CASE("--batch_threads is auto or a positive integer; the replica candidate divides the batch", "[batch_threads]") {
    CHECK(parse_batch_threads("auto") == 0);
    CHECK(parse_batch_threads("1") == 1);
    CHECK(parse_batch_threads("3") == 3);
    for (const char* bad : {"0", "-2", "two", "2x", "", "1.5", "Auto"}) {
        INFO("'" << bad << "'");
        REQUIRE_THROWS_WITH(parse_batch_threads(bad), Catch::Contains("--batch_threads must be auto or a positive integer"));
    }
    // The most threads, up to the threads there are, that divide the batch; 1 when none above 1 does.
    CHECK(replica_candidate(12, 2) == 2);
    CHECK(replica_candidate(12, 4) == 4);
    CHECK(replica_candidate(12, 5) == 4);
    CHECK(replica_candidate(6, 4) == 3);
    CHECK(replica_candidate(16, 16) == 16);
    CHECK(replica_candidate(4, 16) == 4);
    CHECK(replica_candidate(7, 2) == 1);
    CHECK(replica_candidate(12, 1) == 1);
    CHECK(replica_candidate(1, 4) == 1);
}

TEST_CASE("auto picks a valid setting: untimed 1 without a choice, else the faster of two timed ones",
          "[batch_threads][train]") {
    const std::string text = breach_text();
    const Tokenizer tok = Tokenizer::from_text(text);
    const std::vector<int> ids = tok.encode(text);
    GPTConfig c;
    c.vocab_size = tok.size(), c.block_size = 16, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
    TrainConfig tc;
    tc.batch_size = 4;
    tc.batch_threads = 3;  // ignored: auto decides

    const BatchThreadsChoice one = choose_batch_threads(c, tc, 1, ids, Dist{});
    CHECK(one.batch_threads == 1);
    CHECK(one.ms_replicas == 0);
    CHECK(one.ms_shared == 0);
    CHECK(one.why == "one thread");

    TrainConfig odd = tc;
    odd.batch_size = 3;
    const BatchThreadsChoice none = choose_batch_threads(c, odd, 2, ids, Dist{});
    CHECK(none.batch_threads == 1);
    CHECK(none.candidate == 1);
    CHECK(none.ms_replicas == 0);
    CHECK(none.why.find("divides batch_size 3") != std::string::npos);

    const BatchThreadsChoice timed = choose_batch_threads(c, tc, 2, ids, Dist{});
    INFO(timed.why);
    CHECK(timed.candidate == 2);
    CHECK(timed.ms_replicas > 0);
    CHECK(timed.ms_shared > 0);
    CHECK(timed.batch_threads == (timed.ms_replicas < timed.ms_shared ? 2 : 1));
    CHECK(tc.batch_size % timed.batch_threads == 0);
    CHECK(timed.why.find("ms per step against") != std::string::npos);

    SECTION("an answer is remembered when it is clear or was long to measure; a close, quick one is not") {
        TempDir tmp("handgrad-batch-threads-cache");
        CacheDir cache(tmp.path.string());
        const BatchThreadsChoice first = choose_batch_threads(c, tc, 2, ids, Dist{});
        const BatchThreadsChoice again = choose_batch_threads(c, tc, 2, ids, Dist{});
        INFO(first.why << " | " << again.why);
        CHECK(first.seconds > 0);
        if (choice_worth_remembering({first.ms_replicas, first.ms_shared}, first.seconds)) {
            CHECK(again.why.find("remembered") != std::string::npos);
            CHECK(again.seconds == 0);  // nothing timed
            CHECK(again.batch_threads == first.batch_threads);
            CHECK(again.ms_replicas == Approx(first.ms_replicas).margin(1e-3));  // kept to 3 decimals
        } else {
            CHECK(first.why.find("too close to remember") != std::string::npos);
            CHECK(again.why.find("remembered") == std::string::npos);
            CHECK(again.seconds > 0);  // timed afresh
        }
    }

    SECTION("a resumed run keeps the setting its checkpoint records, while it still fits") {
        TempDir tmp("handgrad-batch-threads");
        const std::string path = (tmp.path / "ckpt.safetensors").string();
        TrainConfig two = tc;
        two.batch_threads = 2;
        Trainer t;
        t.start(c, two, tok.vocab, ids, ids);
        t.step();
        t.save(path);
        const Checkpoint ck = Checkpoint::load(path);
        const BatchThreadsChoice kept = choose_batch_threads(c, tc, 2, ids, Dist{}, &ck);
        CHECK(kept.batch_threads == 2);
        CHECK(kept.ms_replicas == 0);  // nothing timed
        CHECK(kept.why == "as the checkpoint was trained");
        // Not with one thread, nor with a batch it does not divide: then auto decides afresh.
        CHECK(choose_batch_threads(c, tc, 1, ids, Dist{}, &ck).batch_threads == 1);
        CHECK(choose_batch_threads(c, odd, 2, ids, Dist{}, &ck).batch_threads == 1);
    }
}

TEST_CASE("train --batch_threads=auto is the run with the setting it printed, bit for bit; bad values get one line",
          "[apps][batch_threads]") {
    TempDir tmp("handgrad-batch-threads");
    const std::string data = write_file(tmp.path / "data.txt", breach_text());
    const std::string a = (tmp.path / "a").string(), b = (tmp.path / "b").string();
    const std::string common = bin("train") + kTiny + " --max_iters=6 --eval_interval=3 --dropout=0.1 --threads=2"
                               " --data=" + data;
    const Run autorun = run(common + " --out_dir=" + a);
    INFO(autorun.output);
    REQUIRE(autorun.status == 0);
    std::smatch m;
    REQUIRE(std::regex_search(autorun.output, m, std::regex("batch threads: ([0-9]+) \\(auto: ")));
    const std::string chosen = m[1];
    CHECK((chosen == "1" || chosen == "2"));
    // The same matmul backend too: another one would be another run (lib/kernels/matmul.h).
    REQUIRE(std::regex_search(autorun.output, m, std::regex("matmul: ([a-z]+) ")));
    const Run explicit_run = run(common + " --batch_threads=" + chosen + " --matmul=" + std::string(m[1]) +
                                 " --out_dir=" + b);
    INFO(explicit_run.output);
    REQUIRE(explicit_run.status == 0);
    CHECK(explicit_run.output.find("(auto: ") == std::string::npos);
    CHECK(check_same_tensors(a + "/ckpt.safetensors", b + "/ckpt.safetensors") > 10);

    // One thread: nothing to choose, nothing timed.
    const Run single = run(common + " --threads=1 --out_dir=" + b);
    INFO(single.output);
    CHECK(single.status == 0);
    CHECK(single.output.find("batch threads: 1 (auto: one thread)") != std::string::npos);

    for (const char* bad : {"0", "-1", "3", "two", "2.5", "auto2"}) {
        INFO(bad);
        expect_error(run(common + " --batch_threads=" + bad + " --out_dir=" + b), "batch_threads");
    }
}
