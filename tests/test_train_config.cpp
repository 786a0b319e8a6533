// TrainConfig's JSON (lib/train/train_config.h): every field survives the round trip; the keys
// present override a base; a wrong type is named; and the app's checkpoints record it.
#include "tests/catch.h"

#include <nlohmann/json.hpp>

#include <string>

#include "lib/checkpoint/checkpoint.h"
#include "lib/train/train_config.h"
#include "tests/app_runner.h"

using namespace hg;
using namespace hg::test;

TEST_CASE("TrainConfig to JSON and back: every field, extra keys beside them, bad values named", "[train][config]") {
    TrainConfig c = train_preset("speedrun");  // far from the defaults in most fields
    c.batch_threads = 4, c.gradient_accumulation_steps = 3, c.max_iters = 1234, c.eval_interval = 17;
    c.eval_iters = 5, c.log_interval = 9, c.grad_clip = 0.5, c.seed = 0xfeedfacecafeULL, c.time_budget = 61.5;
    c.schedule.decay_lr = false, c.schedule.replans = {{250, 1200}, {400, 1180}}, c.schedule.cooldown_frac = 0.35;
    c.adamw.beta1 = 0.8f, c.adamw.beta2 = 0.9f, c.adamw.eps = 1e-6f;
    c.optimizer = OptimizerKind::Muon, c.muon.lr = 0.004f, c.muon.momentum = 0.9f, c.muon.momentum_warmup = 30;
    c.activations = training_plan(AttentionKind::Materialized, Recompute::Block);
    const std::string j = train_config_to_json(c, R"({"data": "input.txt", "threads": 2})");
    const TrainConfig back = train_config_from_json(j);
    CHECK(train_config_to_json(back) == train_config_to_json(c));
    CHECK(back.seed == c.seed);
    CHECK(back.schedule.replans.size() == 2);
    CHECK(back.schedule.replans[1].end == 1180);
    CHECK(back.schedule.decay == LrDecay::Linear);
    CHECK(back.schedule.cooldown_frac == 0.35);
    CHECK(back.adamw.weight_decay == c.adamw.weight_decay);
    CHECK(back.optimizer == OptimizerKind::Muon);
    CHECK(back.muon.momentum_warmup == 30);
    CHECK(back.activations.attention == AttentionKind::Materialized);
    CHECK(back.activations.recompute == Recompute::Block);
    CHECK(!back.activations.keep_logits);  // a training step reads only the loss
    CHECK(!TrainConfig{}.activations.keep_logits);
    const auto parsed = nlohmann::json::parse(j);
    CHECK(parsed["data"] == "input.txt");
    CHECK(parsed["threads"] == 2);
    CHECK(parsed["lr_replans"] == "250:1200,400:1180");
    CHECK(parsed["learning_rate"] == c.schedule.learning_rate);

    // Only the keys present change the base; unknown keys are ignored.
    const TrainConfig partial = train_config_from_json(R"({"max_iters": 77, "lr_decay": "linear", "data": "x"})");
    CHECK(partial.max_iters == 77);
    CHECK(partial.schedule.decay == LrDecay::Linear);
    CHECK(partial.batch_size == TrainConfig{}.batch_size);
    TrainConfig base;
    base.batch_threads = 0;
    CHECK(train_config_from_json("{}", base).batch_threads == 0);

    REQUIRE_THROWS_WITH(train_config_from_json(R"({"batch_size": "twelve"})"), Catch::Contains("batch_size"));
    REQUIRE_THROWS_WITH(train_config_from_json(R"({"lr_decay": "exp"})"), Catch::Contains("exp"));
    REQUIRE_THROWS_WITH(train_config_from_json(R"({"lr_replans": "5-10"})"), Catch::Contains("ITER:END"));
    REQUIRE_THROWS_WITH(train_config_from_json(R"({"optimizer": "sgd"})"), Catch::Contains("sgd"));
    REQUIRE_THROWS_WITH(train_config_from_json(R"({"attention": "fused"})"), Catch::Contains("fused"));
    REQUIRE_THROWS_WITH(train_config_from_json(R"({"recompute": "all"})"), Catch::Contains("all"));
    REQUIRE_THROWS_WITH(train_config_from_json("[1, 2]"), Catch::Contains("not a JSON object"));
    REQUIRE_THROWS_WITH(train_config_from_json("not json"), Catch::Contains("not a JSON object"));
    REQUIRE_THROWS_AS(train_config_to_json(c, "[]"), Error);
}

TEST_CASE("train records its config, the data and the threads in each checkpoint", "[apps][train][config]") {
    TempDir tmp("handgrad-train-config");
    const std::string data = write_file(
        tmp.path / "data.txt", corpus(80, "the lady doth protest too much, methinks; or so the players say.\n"));
    const std::string out = (tmp.path / "out").string();
    const Run r = run(bin("train") + kTiny + " --max_iters=4 --eval_interval=2 --learning_rate=2e-3 --seed=7 "
                      "--data=" + data + " --out_dir=" + out);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const Checkpoint ck = Checkpoint::load(out + "/ckpt.safetensors");
    const TrainConfig c = train_config_from_json(ck.progress.train_config);
    CHECK(c.batch_size == 4);
    CHECK(c.max_iters == 4);
    CHECK(c.seed == 7);
    CHECK(c.schedule.learning_rate == 2e-3);
    CHECK(c.schedule.min_lr == Approx(2e-4));
    CHECK(c.batch_threads == 1);
    const auto j = nlohmann::json::parse(ck.progress.train_config);
    CHECK(j["data"] == data);
    CHECK(j["threads"] == 1);
    CHECK(j["world_size"] == 1);
}
