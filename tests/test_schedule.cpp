// test_schedule.cpp — the learning-rate schedule at its corners, and its validation.
#include "tests/catch.h"
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lib/core/errors.h"
#include "lib/optim/schedule.h"

using Catch::Matchers::Contains;
using namespace hg;

TEST_CASE("lr_at: warmup, cosine, floor", "[schedule]") {
    // warmup 100, cosine over 3000 iterations (so ratios 1/3, 1/2, 2/3 fall on integers).
    const LrSchedule s{1e-3, 1e-4, 100, 3100};
    REQUIRE_NOTHROW(validate(s));

    // Warmup: learning_rate · (iter + 1) / (warmup + 1).
    CHECK(lr_at(s, 0) == 1e-3 * 1 / 101);
    CHECK(lr_at(s, 49) == 1e-3 * 50 / 101);
    CHECK(lr_at(s, 99) == 1e-3 * 100 / 101);
    // End of warmup: ratio 0, cos 0 = 1, the full learning rate.
    CHECK(lr_at(s, 100) == Approx(1e-3).epsilon(1e-15));
    // ratio 1/3: cos(π/3) = 1/2, coeff = 3/4;  ratio 1/2: coeff 1/2;  ratio 2/3: coeff 1/4.
    CHECK(lr_at(s, 1100) == Approx(1e-4 + 0.75 * 9e-4).epsilon(1e-14));
    CHECK(lr_at(s, 1600) == Approx(1e-4 + 0.50 * 9e-4).epsilon(1e-14));
    CHECK(lr_at(s, 2100) == Approx(1e-4 + 0.25 * 9e-4).epsilon(1e-14));
    // End of decay: cos π = -1, exactly min_lr; beyond: min_lr.
    CHECK(lr_at(s, 3100) == Approx(1e-4).epsilon(1e-14));
    CHECK(lr_at(s, 3101) == 1e-4);
    CHECK(lr_at(s, 1000000) == 1e-4);

    // Up during warmup, never up afterwards, always within [0, learning_rate].
    for (int it = 1; it < 3300; it++) {
        INFO("iter " << it);
        if (it < 100) REQUIRE(lr_at(s, it) > lr_at(s, it - 1));
        if (it > 100) REQUIRE(lr_at(s, it) <= lr_at(s, it - 1));
        REQUIRE(lr_at(s, it) > 0);
        REQUIRE(lr_at(s, it) <= 1e-3 * (1 + 1e-15));
    }
}

TEST_CASE("lr_at: linear decay", "[schedule]") {
    // warmup 100, then a straight line from 1e-3 at iter 100 to min_lr at iter 3100.
    LrSchedule s{1e-3, 1e-4, 100, 3100};
    s.decay = LrDecay::Linear;
    CHECK(lr_at(s, 99) == 1e-3 * 100 / 101);  // the warmup is the cosine's
    CHECK(lr_at(s, 100) == Approx(1e-3).epsilon(1e-15));
    CHECK(lr_at(s, 1100) == Approx(1e-4 + 2.0 / 3 * 9e-4).epsilon(1e-14));  // not the cosine's 3/4
    CHECK(lr_at(s, 2350) == Approx(1e-4 + 0.25 * 9e-4).epsilon(1e-14));
    CHECK(lr_at(s, 3100) == Approx(1e-4).epsilon(1e-14));
    CHECK(lr_at(s, 5000) == 1e-4);
    // equal steps down: the second difference is 0 (to rounding)
    for (int it = 101; it < 3099; it += 97) {
        INFO("iter " << it);
        REQUIRE(lr_at(s, it - 1) - 2 * lr_at(s, it) + lr_at(s, it + 1) == Approx(0).margin(1e-17));
    }
    // to zero
    s.min_lr = 0;
    CHECK(lr_at(s, 3100) == 0.0);
    CHECK(lr_at(s, 1600) == Approx(5e-4).epsilon(1e-14));
    // the names, both ways
    CHECK(parse_lr_decay("linear") == LrDecay::Linear);
    CHECK(parse_lr_decay("cosine") == LrDecay::Cosine);
    CHECK(std::string(to_string(LrDecay::Linear)) == "linear");
    REQUIRE_THROWS_WITH(parse_lr_decay("step"), Contains("unknown lr_decay 'step'"));
}

TEST_CASE("lr_at: wsd holds the peak, then cools down along 1 - sqrt", "[schedule]") {
    // warmup 100, decay over 3000 iterations to 3100, the last 0.2 of them (600) cooling down.
    LrSchedule s{1e-3, 1e-4, 100, 3100};
    s.decay = LrDecay::Wsd;
    REQUIRE_NOTHROW(validate(s));
    CHECK(lr_at(s, 99) == 1e-3 * 100 / 101);  // the warmup is the others'
    for (int it : {100, 1000, 2000, 2499}) CHECK(lr_at(s, it) == 1e-3);  // stable
    CHECK(lr_at(s, 2500) == Approx(1e-3).epsilon(1e-15));       // the cooldown's start: sqrt(0)
    CHECK(lr_at(s, 2650) == Approx(1e-4 + 0.5 * 9e-4).epsilon(1e-13));  // a quarter in: 1 - sqrt(1/4)
    CHECK(lr_at(s, 3034) == Approx(1e-4 + (1 - std::sqrt(534.0 / 600)) * 9e-4).epsilon(1e-13));
    CHECK(lr_at(s, 3100) == 1e-4);
    CHECK(lr_at(s, 4000) == 1e-4);
    for (int it = 101; it < 3200; it++) {
        INFO("iter " << it);
        REQUIRE(lr_at(s, it) <= lr_at(s, it - 1));
    }
    // The whole decay a cooldown.
    s.cooldown_frac = 1;
    CHECK(lr_at(s, 850) == Approx(1e-4 + 0.5 * 9e-4).epsilon(1e-13));  // ratio 1/4
    // A re-plan keeps the lr where it is made, in the stable part and in the cooldown, and still
    // ends at min_lr exactly.
    s.cooldown_frac = 0.2;
    for (int at : {1000, 2800}) {
        INFO("re-plan at " << at);
        LrSchedule moved = s;
        moved.replans = {{at, 3500}};
        REQUIRE_NOTHROW(validate(moved));
        CHECK(lr_at(moved, at) == Approx(lr_at(s, at)).epsilon(1e-12));
        CHECK(lr_at(moved, at - 1) == lr_at(s, at - 1));
        CHECK(lr_at(moved, 3499) > 1e-4);
        CHECK(lr_at(moved, 3500) == 1e-4);
    }
    // The name both ways; cooldown_frac in (0, 1].
    CHECK(parse_lr_decay("wsd") == LrDecay::Wsd);
    CHECK(std::string(to_string(LrDecay::Wsd)) == "wsd");
    for (double bad : {0.0, -0.5, 1.01, std::numeric_limits<double>::quiet_NaN()}) {
        INFO(bad);
        LrSchedule b = s;
        b.cooldown_frac = bad;
        REQUIRE_THROWS_WITH(validate(b), Contains("cooldown_frac"));
    }
    LrSchedule other = s;  // the other shapes do not read it
    other.decay = LrDecay::Linear, other.cooldown_frac = 0;
    CHECK_NOTHROW(validate(other));
}

TEST_CASE("lr_at: re-plans move the end of the decay without a jump", "[schedule]") {
    for (LrDecay decay : {LrDecay::Cosine, LrDecay::Linear}) {
        INFO(to_string(decay));
        LrSchedule plain{1e-3, 1e-4, 100, 3100};
        plain.decay = decay;
        LrSchedule s = plain;
        s.replans = {{100, 2100}, {1100, 2600}, {2000, 2400}};  // at the warmup's end, then later, then shorter
        REQUIRE_NOTHROW(validate(s));
        // A re-plan at the warmup's end is a new lr_decay_iters: up to the next one, the same lr.
        LrSchedule first = plain;
        first.lr_decay_iters = 2100;
        for (int it : {0, 99, 100, 600, 1099}) CHECK(lr_at(s, it) == lr_at(first, it));
        // ratio at 1100 is 1/2 (1000 of the 2000 iterations to 2100); the rest, 1/2, is spread
        // over [1100, 2600]: at 1850 the ratio is 3/4
        LrSchedule half = plain;
        half.lr_decay_iters = 100 + 4 * 1000;  // a plain schedule whose ratio at 3100 is 3/4
        CHECK(lr_at(s, 1850) == Approx(lr_at(half, 3100)).epsilon(1e-12));
        // no jumps: neighbouring iterations differ by at most a small step, re-plans included
        for (int it = 101; it < 2500; it++) {
            INFO("iter " << it);
            REQUIRE(std::abs(lr_at(s, it) - lr_at(s, it - 1)) < 3e-6);
            REQUIRE(lr_at(s, it) <= lr_at(s, it - 1));
        }
        // the floor exactly at the last end, and after it
        CHECK(lr_at(s, 2399) > 1e-4);
        CHECK(lr_at(s, 2400) == 1e-4);
        CHECK(lr_at(s, 9999) == 1e-4);
    }
    // Written and read back as the --lr_replans flag.
    const std::vector<Replan> r = {{200, 6400}, {1000, 6350}};
    CHECK(to_string(r) == "200:6400,1000:6350");
    const std::vector<Replan> back = parse_replans("200:6400,1000:6350");
    REQUIRE(back.size() == 2);
    CHECK((back[1].iter == 1000 && back[1].end == 6350));
    CHECK(parse_replans("").empty());
    REQUIRE_THROWS_WITH(parse_replans("200:6400,oops"), Contains("ITER:END") && Contains("'oops'"));
    REQUIRE_THROWS_WITH(parse_replans("200:64x"), Contains("'200:64x'"));
    // Re-plans out of order, before the warmup's end, or ending before they start.
    LrSchedule bad{1e-3, 1e-4, 100, 3100};
    bad.replans = {{50, 2000}};
    REQUIRE_THROWS_WITH(validate(bad), Contains("re-plan at iter 50 comes before"));
    bad.replans = {{500, 2000}, {400, 2000}};
    REQUIRE_THROWS_WITH(validate(bad), Contains("re-plan at iter 400 comes before"));
    bad.replans = {{500, 500}};
    REQUIRE_THROWS_WITH(validate(bad), Contains("must end after it"));
}

TEST_CASE("lr_at: nanoGPT shakespeare_char numbers", "[schedule]") {
    // learning_rate 1e-3, min_lr 1e-4, warmup 100, lr_decay_iters = max_iters = 5000.
    const LrSchedule s{1e-3, 1e-4, 100, 5000};
    CHECK(lr_at(s, 0) == Approx(9.900990099009901e-06).epsilon(1e-15));
    CHECK(lr_at(s, 2550) == Approx(5.5e-4).epsilon(1e-14));  // halfway through the cosine
    CHECK(lr_at(s, 1000) == Approx(1e-4 + 0.5 * (1 + std::cos(M_PI * 900 / 4900)) * 9e-4).epsilon(1e-15));
}

TEST_CASE("lr_at: no warmup, empty cosine, constant", "[schedule]") {
    const LrSchedule no_warmup{1e-3, 1e-4, 0, 10};
    CHECK(lr_at(no_warmup, 0) == Approx(1e-3).epsilon(1e-15));

    // warmup == lr_decay_iters: straight from warmup to the floor.
    const LrSchedule empty{1e-3, 1e-4, 10, 10};
    REQUIRE_NOTHROW(validate(empty));
    CHECK(lr_at(empty, 9) == 1e-3 * 10 / 11);
    CHECK(lr_at(empty, 10) == 1e-4);
    CHECK(std::isfinite(lr_at(empty, 10)));

    // decay_lr = false: the learning rate, always, warmup and min_lr ignored.
    const LrSchedule constant{6e-4, 1e-3 /* unused, may even exceed lr */, 100, 5000, false};
    REQUIRE_NOTHROW(validate(constant));
    for (int it : {0, 1, 99, 100, 2550, 5000, 100000}) CHECK(lr_at(constant, it) == 6e-4);

    REQUIRE_THROWS_WITH(lr_at(no_warmup, -1), Contains("got -1"));
}

TEST_CASE("validate: schedules that make no sense", "[schedule]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    REQUIRE_THROWS_WITH(validate({-1e-3, 0, 10, 100}), Contains("learning_rate must be") && Contains("-0.001"));
    REQUIRE_THROWS_WITH(validate({nan, 0, 10, 100}), Contains("learning_rate must be"));
    REQUIRE_THROWS_WITH(validate({-1e-3, 0, 10, 100, false}), Contains("learning_rate"));
    REQUIRE_THROWS_WITH(validate({1e-3, -1e-4, 10, 100}), Contains("min_lr must be"));
    REQUIRE_THROWS_WITH(validate({1e-3, 2e-3, 10, 100}),
                        Contains("min_lr (0.002) must not exceed learning_rate (0.001)"));
    REQUIRE_THROWS_WITH(validate({1e-3, 1e-4, -1, 100}), Contains("warmup_iters must be >= 0, got -1"));
    REQUIRE_THROWS_WITH(validate({1e-3, 1e-4, 0, -5}), Contains("lr_decay_iters must be >= 0, got -5"));
    REQUIRE_THROWS_WITH(validate({1e-3, 1e-4, 200, 100}),
                        Contains("warmup_iters (200) must not exceed lr_decay_iters (100)"));
    REQUIRE_NOTHROW(validate({0.0, 0.0, 0, 0}));
}
