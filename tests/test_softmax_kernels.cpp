// test_softmax_kernels.cpp — the softmax Highway kernels against their scalar twins on every SIMD
// target this CPU runs, on lengths that exercise the scalar tail (1, 5, 7, 33, 127, 1000).
//
// Tolerance: each output within 1e-6 + 4e-6·|twin| of the float twin. The kernels differ
// from the twin only in summation order (lanes) and in the exponential (exp-inl.h, within 4
// roundings). They are also checked against the double twin, within the
// same tolerance, so "agrees with the twin" cannot hide a twin that is itself off.
// Measured worst (AVX3, AVX2, SSE4, SSSE3, SCALAR): 2.8 % of the tolerance.
#include "tests/catch.h"
#include <cmath>
#include <string>
#include <vector>

#include "lib/kernels/simd.h"
#include "lib/kernels/softmax_kernels.h"
#include "tests/gradcheck.h"
#include "tests/layer_checks.h"

using hg::test::for_each_target;
using hg::test::randn;

namespace {

const size_t kLengths[] = {1, 5, 7, 33, 127, 1000};
constexpr double kAtol = 1e-6, kRtol = 4e-6;

// <= 1 when every entry is within the tolerance above (NaN fails).
template <typename A, typename B>
double worst(const A* got, const B* want, size_t n) {
    return hg::test::worst_ratio(got, want, n, kAtol, kRtol);
}

}  // namespace

TEST_CASE("softmax_row kernel matches its scalar twin on every SIMD target", "[simd]") {
    for_each_target([](const std::string& target) {
        for (size_t n : kLengths)
            for (double scale : {1.0, 30.0}) {
                auto x = randn<float>(n, 1000 + n, scale);
                std::vector<double> x_d(x.begin(), x.end()), want_d(n);
                std::vector<float> got(n), want(n), inplace = x;
                hg::softmax_row(got.data(), x.data(), n);
                hg::softmax_row_scalar(want.data(), x.data(), n);
                hg::softmax_row_scalar(want_d.data(), x_d.data(), n);
                hg::softmax_row(inplace.data(), inplace.data(), n);  // attention runs it in place
                INFO(target << " n=" << n << " scale=" << scale);
                CHECK(worst(got.data(), want.data(), n) <= 1.0);
                CHECK(worst(got.data(), want_d.data(), n) <= 1.0);
                CHECK(inplace == got);
                double sum = 0;
                for (float p : got) sum += p;
                CHECK(sum == Approx(1.0).epsilon(1e-5));
            }
    });
}

TEST_CASE("crossentropy_row kernel matches its scalar twin on every SIMD target", "[simd]") {
    for_each_target([](const std::string& target) {
        for (size_t n : kLengths)
            for (double scale : {1.0, 30.0}) {
                auto x = randn<float>(n, 2000 + n, scale);
                std::vector<double> x_d(x.begin(), x.end()), want_d(n);
                std::vector<float> got(n), want(n);
                for (int target_id : {-1, 0, (int)n / 2, (int)n - 1}) {
                    float loss = hg::crossentropy_row(got.data(), x.data(), n, target_id);
                    float loss_f = hg::crossentropy_row_scalar(want.data(), x.data(), n, target_id);
                    double loss_d =
                        hg::crossentropy_row_scalar(want_d.data(), x_d.data(), n, target_id);
                    INFO(target << " n=" << n << " scale=" << scale << " target=" << target_id);
                    CHECK(worst(got.data(), want.data(), n) <= 1.0);
                    CHECK(worst(got.data(), want_d.data(), n) <= 1.0);
                    CHECK(worst(&loss, &loss_f, 1) <= 1.0);
                    CHECK(worst(&loss, &loss_d, 1) <= 1.0);
                    if (target_id < 0)
                        CHECK(loss == 0.0f);
                    else
                        CHECK(loss ==
                              Approx(-std::log(want_d[target_id])).epsilon(1e-5).margin(1e-6));
                    // In place (probs over logits): the same bits, the loss included.
                    std::vector<float> in_place = x, twin_in_place = x;
                    CHECK(hg::crossentropy_row(in_place.data(), in_place.data(), n, target_id) == loss);
                    CHECK(in_place == got);
                    CHECK(hg::crossentropy_row_scalar(twin_in_place.data(), twin_in_place.data(), n, target_id) ==
                          loss_f);
                    CHECK(twin_in_place == want);
                }
            }
    });
}

TEST_CASE("softmax_backward_row kernel matches its scalar twin on every SIMD target", "[simd]") {
    for_each_target([](const std::string& target) {
        for (size_t n : kLengths) {
            auto x = randn<float>(n, 3000 + n), dout = randn<float>(n, 4000 + n);
            std::vector<float> p(n), got(n), want(n), inplace = dout;
            hg::softmax_row_scalar(p.data(), x.data(), n);
            std::vector<double> p_d(p.begin(), p.end()), dout_d(dout.begin(), dout.end()),
                want_d(n);
            hg::softmax_backward_row(got.data(), p.data(), dout.data(), n);
            hg::softmax_backward_row_scalar(want.data(), p.data(), dout.data(), n);
            hg::softmax_backward_row_scalar(want_d.data(), p_d.data(), dout_d.data(), n);
            hg::softmax_backward_row(inplace.data(), p.data(), inplace.data(), n);  // dinp == dout
            INFO(target << " n=" << n);
            CHECK(worst(got.data(), want.data(), n) <= 1.0);
            CHECK(worst(got.data(), want_d.data(), n) <= 1.0);
            CHECK(inplace == got);
            // the softmax backward's output sums to 0 (a shift of the input changes nothing)
            double sum = 0;
            for (float g : got) sum += g;
            CHECK(std::fabs(sum) <= 1e-5);
        }
    });
}
