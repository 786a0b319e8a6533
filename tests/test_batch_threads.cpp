// --batch_threads and the backend, chosen together at start-up (lib/train/batch_threads.h): the
// flag's values, the settings auto considers (divisors of the batch that fit in memory), the
// choice itself, what it remembers and how a second run, a resumed run and a replay make the
// same choice; and through the app: a run with auto is, bit for bit, the run with the setting it
// printed; bad values get one line.
#include "tests/catch.h"

#include <omp.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "lib/model/memory_check.h"
#include "lib/text/char_tokenizer.h"
#include "lib/train/batch_threads.h"
#include "lib/train/matmul_choice.h"
#include "lib/train/startup_cache.h"
#include "lib/train/trainer.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;

namespace {

std::string breach_text() {
    return corpus(80, "once more unto the breach, dear friends, once more; or close the wall up.\n");
}

struct Tiny {
    std::string text = breach_text();
    Tokenizer tok = Tokenizer::from_text(text);
    std::vector<int> ids = tok.encode(text);
    GPTConfig c;
    TrainConfig tc;
    Tiny() {
        c.vocab_size = tok.size(), c.block_size = 16, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
        tc.batch_size = 4;
        tc.batch_threads = 3;  // ignored: auto decides
    }
};

// The checkpoint at `path` of one step of `t`'s model with `train`, its train_config recording `run_info`.
Checkpoint checkpoint_recording(const Tiny& t, const TrainConfig& train, const nlohmann::json& run_info,
                                const std::string& path) {
    Trainer tr;
    tr.start(t.c, train, t.tok.vocab, t.ids, t.ids);
    tr.run_info = run_info.dump();
    tr.step();
    tr.save(path);
    return Checkpoint::load(path);
}

// What the app tests of auto share: a text, three scratch out_dirs and a start-up cache of their own.
struct AutoRunDirs {
    TempDir tmp;
    std::string data, a, b, c, cache;
    explicit AutoRunDirs(const char* name)
        : tmp(name), data(write_file(tmp.path / "data.txt", breach_text())), a((tmp.path / "a").string()),
          b((tmp.path / "b").string()), c((tmp.path / "c").string()),
          cache("HANDGRAD_CACHE_DIR=" + (tmp.path / "cache").string() + " ") {}
};

}  // namespace

TEST_CASE("--batch_threads is auto or a positive integer; auto considers the divisors of the batch that fit",
          "[batch_threads]") {
    CHECK(parse_batch_threads("auto") == 0);
    CHECK(parse_batch_threads("1") == 1);
    CHECK(parse_batch_threads("3") == 3);
    for (const char* bad : {"0", "-2", "two", "2x", "", "1.5", "Auto"}) {
        INFO("'" << bad << "'");
        REQUIRE_THROWS_WITH(parse_batch_threads(bad),
                            Catch::Contains("--batch_threads must be auto or a positive integer"));
    }
    const auto all = [](int) { return true; };
    using V = std::vector<int>;
    CHECK(batch_threads_candidates(12, 2, all) == V{1, 2});
    CHECK(batch_threads_candidates(12, 5, all) == V{1, 2, 3, 4});
    CHECK(batch_threads_candidates(12, 16, all) == V{1, 2, 3, 4, 6, 12});
    CHECK(batch_threads_candidates(64, 128, all) == V{1, 2, 4, 8, 16, 32, 64});
    CHECK(batch_threads_candidates(7, 2, all) == V{1});
    CHECK(batch_threads_candidates(12, 1, all) == V{1});
    CHECK(batch_threads_candidates(1, 4, all) == V{1});
    // Only those that fit; one model always (the run's memory check refuses it otherwise).
    CHECK(batch_threads_candidates(12, 16, [](int R) { return R <= 3; }) == V{1, 2, 3});
    CHECK(batch_threads_candidates(12, 16, [](int) { return false; }) == V{1});
}

TEST_CASE("auto: untimed with nothing to choose, else the fastest backend and batch threads, timed together",
          "[batch_threads][train]") {
    const Tiny t;
    TempDir tmp("handgrad-step-setup");
    const CacheDir cache(tmp.path.string());
    StepSetupFlags flags;

    StepSetupFlags openblas, highway;
    openblas.matmul = "openblas", highway.matmul = "highway";
    const StepSetup one = choose_step_setup(t.c, t.tc, 1, t.ids, openblas);
    CHECK(one.batch_threads == 1);
    CHECK(one.backend == MatmulBackend::OpenBLAS);
    CHECK(one.choice.ms.empty());  // nothing timed
    CHECK(one.batch_threads_why == "one thread");
    CHECK(one.matmul_why == "as --matmul says");

    TrainConfig odd = t.tc;
    odd.batch_size = 3;
    const StepSetup none = choose_step_setup(t.c, odd, 2, t.ids, highway);
    CHECK(none.Rs == std::vector<int>{1});
    CHECK(none.batch_threads_why.find("divides batch_size 3") != std::string::npos);

    const StepSetup timed = choose_step_setup(t.c, t.tc, 2, t.ids, flags);
    INFO(timed.batch_threads_why << " | " << timed.matmul_why);
    CHECK(timed.Rs == std::vector<int>{1, 2});
    CHECK(timed.backends == matmul_backends());
    REQUIRE(timed.choice.ms.size() == 2 * matmul_backends().size());
    for (double ms : timed.choice.ms) CHECK(ms > 0);
    const size_t fastest = std::min_element(timed.choice.ms.begin(), timed.choice.ms.end()) - timed.choice.ms.begin();
    CHECK(timed.choice.taken == fastest);
    CHECK(timed.choice.by == ChosenBy::Measured);
    CHECK(timed.choice.seconds > 0);
    const size_t nb = matmul_backends().size();
    CHECK(timed.batch_threads == timed.Rs[fastest / nb]);
    CHECK(timed.backend == matmul_backends()[fastest % nb]);
    CHECK(timed.batch_threads_why.find("forward and backward: ~") != std::string::npos);
    CHECK(timed.batch_threads_why.find("timed in") != std::string::npos);

    SECTION("memory: a layout whose replicas do not fit is not considered; given, it is refused") {
        const MemoryNeed need1 = memory_need(t.c, t.tc.batch_size, t.c.block_size, 1, 3);
        const MemoryNeed need2 = memory_need(t.c, t.tc.batch_size, t.c.block_size, 2, 3);
        REQUIRE(need2.total() > need1.total());  // a replica's gradient arena, at least
        StepSetupFlags tight;
        tight.memory_bytes = (need1.total() + need2.total()) / 2 / 0.9;
        const StepSetup fits = choose_step_setup(t.c, t.tc, 2, t.ids, tight);
        CHECK(fits.Rs == std::vector<int>{1});
        CHECK(fits.batch_threads == 1);
        CHECK(fits.batch_threads_why.find("do not fit") != std::string::npos);
        CHECK_NOTHROW(check_memory(need1, *tight.memory_bytes));
        CHECK_THROWS_WITH(check_memory(need2, *tight.memory_bytes), Catch::Contains("available"));
    }

    SECTION("a second run takes the answer as recorded, ties and all: nothing timed, the same choice") {
        const StepSetup again = choose_step_setup(t.c, t.tc, 2, t.ids, flags);
        CHECK(again.choice.by == ChosenBy::Remembered);
        CHECK(again.choice.seconds == 0);
        CHECK(again.batch_threads == timed.batch_threads);
        CHECK(again.backend == timed.backend);
        CHECK(again.batch_threads_why.find("remembered") != std::string::npos);
        // A line whose times all tie, naming the last option: the last is taken, not the first
        // of equals (a re-decision from rounded times could flip a tie between a run and its replay).
        const std::string key = step_choice_key(t.c, t.tc, 2);
        std::string options, times;
        for (int R : {1, 2})
            for (MatmulBackend b : matmul_backends()) options += fmt::format(" {}/{}", to_string(b), R), times += " 5";
        const std::string last = fmt::format("{}/2", to_string(matmul_backends().back()));
        cache_put(key + " | options" + options, last + times);
        const StepSetup tie = choose_step_setup(t.c, t.tc, 2, t.ids, flags);
        CHECK(tie.choice.by == ChosenBy::Remembered);
        CHECK(tie.batch_threads == 2);
        CHECK(tie.backend == matmul_backends().back());
        // Another key (here: other threads) is measured afresh.
        CHECK(choose_step_setup(t.c, t.tc, 3, t.ids, flags).choice.by == ChosenBy::Measured);
    }

    SECTION("a resumed run keeps the setting its checkpoint records, while it still fits") {
        TempDir dir("handgrad-batch-threads");
        const std::string path = (dir.path / "ckpt.safetensors").string();
        TrainConfig two = t.tc;
        two.batch_threads = 2;
        const Checkpoint ck = checkpoint_recording(t, two, {{"matmul", "highway"}}, path);
        StepSetupFlags resumed;
        resumed.resumed = &ck;
        const StepSetup kept = choose_step_setup(t.c, t.tc, 2, t.ids, resumed);
        CHECK(kept.batch_threads == 2);
        CHECK(kept.backend == MatmulBackend::Highway);
        CHECK(kept.choice.ms.empty());  // nothing timed
        CHECK(kept.batch_threads_why == "as the checkpoint was trained");
        CHECK(kept.matmul_why == "auto: as the checkpoint was trained");
        // Not with one thread, nor with a batch it does not divide: then auto decides afresh.
        CHECK(choose_step_setup(t.c, t.tc, 1, t.ids, resumed).batch_threads == 1);
        CHECK(choose_step_setup(t.c, odd, 2, t.ids, resumed).batch_threads == 1);
        // A flag wins over the record.
        resumed.matmul = "openblas";
        CHECK(choose_step_setup(t.c, t.tc, 2, t.ids, resumed).backend == MatmulBackend::OpenBLAS);
    }
}

// The calls of `t`'s whole step, recorded at its own batch: what training_step_work must give.
static std::vector<MatmulCall> whole_step_calls(const Tiny& t) {
    return record_matmuls([&] {
        Trainer tr;
        tr.start(t.c, t.tc, t.tok.vocab, t.ids, t.ids);
        tr.step();
    });
}

static void check_same_calls(const std::vector<MatmulCall>& got, const std::vector<MatmulCall>& whole) {
    REQUIRE(got.size() == whole.size());
    for (const MatmulCall& w : whole) {
        const auto it = std::find_if(got.begin(), got.end(), [&](const MatmulCall& m) { return m.same_call(w); });
        REQUIRE(it != got.end());
        CHECK(it->count == w.count);
    }
}

TEST_CASE("the step's work: the products of a deep model at the run's batch, from one and two blocks at a few "
          "sequences; the rest timed", "[batch_threads][matmul]") {
    Tiny t;
    t.c.dropout = 0.1f;
    t.tc.batch_size = 8;
    for (int L : {4, 2})  // 2: at b = the whole batch a replica, the timing model is the run's own
        for (AttentionKind attention : {AttentionKind::Flash, AttentionKind::Materialized})
            for (OptimizerKind optimizer : {OptimizerKind::AdamW, OptimizerKind::Muon})
                for (int R : {1, 2})
                    for (int b : {0, 1, 2, 3}) {  // 0: as many as the memory allows (here the whole batch)
                        INFO(L << " blocks, " << to_string(attention) << ", " << to_string(optimizer)
                               << ", batch threads " << R << ", timed on " << b << " sequences a replica");
                        t.c.n_layer = L, t.tc.batch_threads = R, t.tc.activations.attention = attention;
                        t.tc.optimizer = optimizer;
                        const ModelWork work = training_step_work(t.c, t.tc, t.ids, b);
                        CHECK(work.other_ms > 0);
                        const std::vector<MatmulCall> whole = whole_step_calls(t);
                        check_same_calls(work.calls, whole);
                        // With AdamW every product is the replicas': R side by side (Muon's small
                        // matrices run in a team of their own, one slot per thread).
                        if (R > 1 && optimizer == OptimizerKind::AdamW)
                            for (const MatmulCall& m : work.calls) CHECK(m.team == R);
                    }
}

TEST_CASE("calls grown to the run's batch: the sizes and counts that double with the batch grow, the rest stay; "
          "calls that pair up two ways are refused", "[batch_threads][matmul]") {
    Tiny t;
    t.c.n_embd = 24, t.c.n_layer = 1;  // rows at one sequence (16) are no size of the model's own
    t.tc.batch_threads = 1;
    const auto recorded = [&](int batch) {
        Tiny s = t;
        s.tc.batch_size = batch;
        return whole_step_calls(s);
    };
    const std::vector<MatmulCall> one = recorded(1), two = recorded(2);
    const std::optional<std::vector<MatmulCall>> grown = calls_at_batch(one, one, two, 1, 6);
    REQUIRE(grown);
    check_same_calls(*grown, recorded(6));
    // At b = 2 as well (every size that grows is a multiple of 2 sequences' rows).
    const std::optional<std::vector<MatmulCall>> from_two = calls_at_batch(two, two, recorded(4), 2, 6);
    REQUIRE(from_two);
    check_same_calls(*from_two, recorded(6));

    // Planted: a call that is two at 2b but one at b (they coincide at b), and a call that pairs
    // with two calls at 2b.
    const MatmulCall x{MatmulForm::NT, 16, 24, 24, 24, 24, 24, 0.0f, 1, 1};
    MatmulCall y = x, y2 = x;
    y.M = 32, y2.N = 48;  // at 2b: x's rows doubled, and a call whose columns doubled
    MatmulCall z = x;
    z.K = 8;
    CHECK_FALSE(calls_at_batch({x}, {x, z}, {y, y2}, 1, 4));  // which is x at 2b?
    MatmulCall w = x;
    w.M = 32;  // at b, a call that is x at 2b as well: two calls at b, one at 2b
    CHECK_FALSE(calls_at_batch({x}, {x, w}, {y, z}, 1, 4));
    CHECK_FALSE(calls_at_batch({x}, {x}, {x, y}, 1, 4));   // not one to one
    MatmulCall odd = x;
    odd.M = 33;  // neither the same nor doubled
    CHECK_FALSE(calls_at_batch({x}, {x}, {odd}, 1, 4));
    CHECK_FALSE(calls_at_batch({z}, {x}, {y}, 1, 4));  // a call not among the recorded ones
    const std::optional<std::vector<MatmulCall>> fine = calls_at_batch({x}, {x}, {y}, 1, 4);
    REQUIRE(fine);
    CHECK((fine->at(0).M == 64 && fine->at(0).N == 24 && fine->at(0).count == 1));
    // A replica's call, side by side with another (team 2, counted twice), grown by one model's recordings.
    MatmulCall pair = x;
    pair.team = 2, pair.count = 2;
    const std::optional<std::vector<MatmulCall>> replicas = calls_at_batch({pair}, {x}, {y}, 1, 4);
    REQUIRE(replicas);
    CHECK((replicas->at(0).M == 64 && replicas->at(0).team == 2 && replicas->at(0).count == 2));
    MatmulCall x_in_team = x;
    x_in_team.team = 3;  // at b, x both alone and in a team: which is the pair's?
    MatmulCall y_in_team = y;
    y_in_team.team = 3;
    CHECK_FALSE(calls_at_batch({pair}, {x, x_in_team}, {y, y_in_team}, 1, 4));
    CHECK(calls_at_batch({x}, {x, x_in_team}, {y, y_in_team}, 1, 4));  // x itself is there
    MatmulCall x_bf16 = x;
    x_bf16.bf16 = true;  // the same shape with bf16 inputs: another call, never grown as x
    CHECK_FALSE(calls_at_batch({x_bf16}, {x}, {y}, 1, 4));
}

TEST_CASE("a second batch threads setting grows its calls by the first's recordings at the same b",
          "[batch_threads][matmul]") {
    Tiny t;
    t.tc.batch_size = 8;
    t.c.n_layer = 4;
    BatchGrowth growth;
    t.tc.batch_threads = 1;
    check_same_calls(training_step_work(t.c, t.tc, t.ids, 1, &growth).calls, whole_step_calls(t));
    REQUIRE(growth.b == 1);
    for (const MatmulCall& m : growth.at_b) CHECK(m.team == 1);
    const BatchGrowth first = growth;
    t.tc.batch_threads = 2;
    check_same_calls(training_step_work(t.c, t.tc, t.ids, 1, &growth).calls, whole_step_calls(t));
    CHECK(growth.at_2b.size() == first.at_2b.size());  // kept as the first setting recorded it
    // Planted: recordings in which nothing grows. Used, they leave the calls at b's sizes.
    BatchGrowth flat = first;
    flat.at_2b = flat.at_b;
    const std::vector<MatmulCall> stunted = training_step_work(t.c, t.tc, t.ids, 1, &flat).calls;
    const std::vector<MatmulCall> whole = whole_step_calls(t);
    const auto work = [](const std::vector<MatmulCall>& calls) {
        double w = 0;
        for (const MatmulCall& m : calls) w += double(m.M) * m.N * m.K * m.count;
        return w;
    };
    CHECK(work(stunted) < 0.5 * work(whole));  // the replicas' products at 1 sequence each, not 4
}

TEST_CASE("under bf16 the options are every way of the bf16 products with every R and backend; a flag or a "
          "checkpoint leaves one way; a float run has none", "[batch_threads][bf16]") {
    Tiny t;
    t.tc.batch_size = 4;
    t.tc.dtype = DType::BFloat16;
    TempDir tmp("handgrad-bf16-options");
    const CacheDir cache(tmp.path.string());
    const size_t nb = matmul_backends().size();
    const StepSetup all = choose_step_setup(t.c, t.tc, 2, t.ids, StepSetupFlags{});
    INFO(all.way_why);
    CHECK(all.ways == matmul_bf16_backends());
    REQUIRE(all.choice.ms.size() == all.ways.size() * 2 * nb);
    const size_t fastest = std::min_element(all.choice.ms.begin(), all.choice.ms.end()) - all.choice.ms.begin();
    CHECK(all.choice.taken == fastest);
    CHECK(all.way == all.ways[fastest / (2 * nb)]);
    CHECK(all.batch_threads == all.Rs[fastest / nb % 2]);
    CHECK(all.backend == matmul_backends()[fastest % nb]);
    CHECK(all.way_why.find(all.ways.size() == 2 ? " with widen" : "auto: the only way here") != std::string::npos);

    StepSetupFlags flags;
    flags.matmul_bf16 = "widen";
    const StepSetup given = choose_step_setup(t.c, t.tc, 2, t.ids, flags);
    CHECK(given.ways == std::vector<Bf16Backend>{Bf16Backend::Widen});
    CHECK(given.way == Bf16Backend::Widen);
    CHECK(given.way_why == "as --matmul_bf16 says");
    CHECK(given.choice.ms.size() == 2 * nb);
    flags.matmul_bf16 = "fast";
    CHECK_THROWS_WITH(choose_step_setup(t.c, t.tc, 2, t.ids, flags),
                      Catch::Contains("--matmul_bf16 must be auto, onednn or widen (got 'fast')"));

    TrainConfig f = t.tc;
    f.dtype = DType::Float32;
    const StepSetup float_run = choose_step_setup(t.c, f, 2, t.ids, StepSetupFlags{});
    CHECK(float_run.ways.size() == 1);
    CHECK(float_run.way_why.empty());
    CHECK(float_run.choice.ms.size() == 2 * nb);

    // A checkpoint that records the widened way: kept, whatever else it leaves open.
    const std::string path = (tmp.path / "ckpt.safetensors").string();
    TrainConfig one = t.tc;
    one.batch_threads = 1;
    const Checkpoint ck = checkpoint_recording(t, one, {{"matmul_bf16", "widen"}}, path);
    StepSetupFlags resumed;
    resumed.resumed = &ck;
    const StepSetup kept = choose_step_setup(t.c, t.tc, 2, t.ids, resumed);
    CHECK(kept.ways == std::vector<Bf16Backend>{Bf16Backend::Widen});
    CHECK(kept.way_why == "auto: as the checkpoint was trained");
    // What a checkpoint records is informational: junk, or a way that cannot run here, is no record.
    CHECK_FALSE(recorded_matmul_bf16("not json"));
    CHECK_FALSE(recorded_matmul_bf16(R"({"matmul_bf16": 3})"));
    CHECK_FALSE(recorded_matmul_bf16(R"({"matmul_bf16": "fast"})"));
    CHECK(recorded_matmul_bf16(R"({"matmul_bf16": "onednn"})").has_value() == (matmul_bf16_backends().size() == 2));
}

TEST_CASE("train --batch_threads=auto is the run with the settings it printed, bit for bit, in either dtype; a "
          "second run takes them from the cache; bad values get one line", "[apps][batch_threads][bf16]") {
    for (const std::string dtype : {"float32", "bfloat16"}) {
        INFO(dtype);
        const AutoRunDirs dirs("handgrad-batch-threads");
        const std::string &a = dirs.a, &b = dirs.b, &c = dirs.c, &cache = dirs.cache;
        // kTiny's --matmul and --threads are replaced: the later flag wins.
        const std::string common = bin("train") + kTiny + " --max_iters=6 --eval_interval=3 --dropout=0.1 --threads=2"
                                   " --matmul=auto --dtype=" + dtype + " --data=" + dirs.data;
        const Run autorun = run(cache + common + " --out_dir=" + a);
        INFO(autorun.output);
        REQUIRE(autorun.status == 0);
        std::smatch m;
        REQUIRE(std::regex_search(autorun.output, m, std::regex("batch threads: ([0-9]+) \\(auto: ")));
        const std::string chosen = m[1];
        CHECK((chosen == "1" || chosen == "2"));
        CHECK(autorun.output.find("timed in") != std::string::npos);
        // The same matmul backend too, and under bf16 the same way: another one would be another run
        // (lib/kernels/matmul.h, matmul_bf16.h).
        REQUIRE(std::regex_search(autorun.output, m, std::regex("matmul: ([a-z]+) ")));
        const std::string backend = m[1];
        std::string way;
        if (dtype == "bfloat16") {
            REQUIRE(std::regex_search(autorun.output, m, std::regex("dtype: bfloat16 \\(products: ([a-z]+) ")));
            way = m[1];
            const bool two_ways = matmul_bf16_backends().size() == 2;
            CHECK(autorun.output.find(two_ways ? " with widen" : "auto: the only way here") != std::string::npos);
        }
        const Run explicit_run = run(cache + common + " --batch_threads=" + chosen + " --matmul=" + backend +
                                     (way.empty() ? "" : " --matmul_bf16=" + way) + " --out_dir=" + b);
        INFO(explicit_run.output);
        REQUIRE(explicit_run.status == 0);
        CHECK(explicit_run.output.find("auto: ") == std::string::npos);
        CHECK(check_same_tensors(a + "/ckpt.safetensors", b + "/ckpt.safetensors") > 10);

        // The second run with auto: remembered, the same choices, the same run.
        const Run second = run(cache + common + " --out_dir=" + c);
        INFO(second.output);
        REQUIRE(second.status == 0);
        CHECK(second.output.find("batch threads: " + chosen + " (auto: ") != std::string::npos);
        CHECK(second.output.find("matmul: " + backend + " (auto: ") != std::string::npos);
        if (!way.empty()) CHECK(second.output.find("products: " + way) != std::string::npos);
        CHECK(second.output.find("remembered from an earlier run") != std::string::npos);
        CHECK(second.output.find("timed in") == std::string::npos);
        CHECK(check_same_tensors(a + "/ckpt.safetensors", c + "/ckpt.safetensors") > 10);

        // The replay of the first run from its run.toml: every setting given, nothing timed, the same run.
        const Run replay = run(cache + bin("train") + " --config=" + a + "/run.toml --out_dir=" + b);
        INFO(replay.output);
        REQUIRE(replay.status == 0);
        CHECK(replay.output.find("matmul: " + backend + " (as --matmul says)") != std::string::npos);
        if (!way.empty()) CHECK(replay.output.find("; as --matmul_bf16 says)") != std::string::npos);
        CHECK(replay.output.find("auto: ") == std::string::npos);
        CHECK(check_same_tensors(a + "/ckpt.safetensors", b + "/ckpt.safetensors") > 10);
    }
    const AutoRunDirs dirs("handgrad-batch-threads");
    const std::string common =
        bin("train") + kTiny + " --max_iters=6 --eval_interval=3 --threads=2 --data=" + dirs.data;
    // One thread: nothing to choose, nothing timed.
    const Run single = run(dirs.cache + common + " --threads=1 --matmul=openblas --out_dir=" + dirs.b);
    INFO(single.output);
    CHECK(single.status == 0);
    CHECK(single.output.find("batch threads: 1 (auto: one thread)") != std::string::npos);

    for (const char* bad : {"0", "-1", "3", "two", "2.5", "auto2"}) {
        INFO(bad);
        expect_error(run(common + " --batch_threads=" + bad + " --out_dir=" + dirs.b), "batch_threads");
    }
}

TEST_CASE("train --dtype=bfloat16: a resumed run keeps its checkpoint's way of the bf16 products; bad values of "
          "--matmul_bf16 get one line", "[apps][batch_threads][bf16]") {
    const AutoRunDirs dirs("handgrad-bf16-way");
    const std::string common = bin("train") + kTiny + " --max_iters=6 --lr_decay_iters=6 --eval_interval=3"
                               " --threads=2 --matmul=auto --dtype=bfloat16 --data=" + dirs.data;
    // Widened by flag, stopped at 3 and resumed with auto: the checkpoint's way, the straight run's bits.
    const std::string widen = dirs.cache + common + " --batch_threads=1 --matmul=highway --matmul_bf16=widen";
    REQUIRE(run(widen + " --out_dir=" + dirs.b).status == 0);
    REQUIRE(run(widen + " --max_iters=3 --out_dir=" + dirs.c).status == 0);
    const Run resumed = run(dirs.cache + common + " --max_iters=6 --init_from=resume --out_dir=" + dirs.c);
    INFO(resumed.output);
    REQUIRE(resumed.status == 0);
    CHECK(resumed.output.find("products: widen") != std::string::npos);
    CHECK(resumed.output.find("; auto: as the checkpoint was trained)") != std::string::npos);
    CHECK(check_same_tensors(dirs.b + "/ckpt.safetensors", dirs.c + "/ckpt.safetensors") > 10);

    for (const char* bad : {"bf16", "oneDNN", "auto2"}) {
        INFO("'" << bad << "'");
        expect_error(run(common + " --matmul_bf16=" + bad + " --out_dir=" + dirs.b),
                     "--matmul_bf16 must be auto, onednn or widen");
    }
    if (matmul_bf16_backends().size() == 1)
        expect_error(run(common + " --matmul_bf16=onednn --out_dir=" + dirs.b), "--matmul_bf16=onednn: ");
}
