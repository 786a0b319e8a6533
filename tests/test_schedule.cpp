// test_schedule.cpp — the learning-rate schedule at its corners, and its validation.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "lib/errors.h"
#include "lib/schedule.h"

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
