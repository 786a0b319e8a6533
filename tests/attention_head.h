// attention_head.h — what the attention tests' error bounds read: head (b, h)'s q, k and v from a
// (B·T, 3C) buffer and its output gradient from a (B·T, C) buffer, as doubles, and an error as a
// share of its bound.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

namespace hg::test {

struct AttentionHead {
    const std::vector<float>& qkv;
    const std::vector<float>& dout;
    int b, h, T, C, NH;
    double q(int t, int i) const { return qkv[row(t) * 3 * size_t(C) + col(i)]; }
    double k(int t, int i) const { return qkv[row(t) * 3 * size_t(C) + C + col(i)]; }
    double v(int t, int i) const { return qkv[row(t) * 3 * size_t(C) + 2 * size_t(C) + col(i)]; }
    double dy(int t, int i) const { return dout[row(t) * size_t(C) + col(i)]; }

private:
    size_t row(int t) const { return size_t(b) * T + t; }
    size_t col(int i) const { return size_t(h) * (C / NH) + i; }
};

// |got − exact| / bound: 0 for no error, infinite for an error where the bound is 0.
inline double bound_ratio(double got, double exact, double bound) {
    const double err = std::fabs(got - exact);
    return err == 0 ? 0.0 : err / bound;
}

}  // namespace hg::test
