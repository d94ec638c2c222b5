#version 450
// Gather along one dim. Source [outer, S, inner], indices and output [outer, M, inner]:
// out[o, m, k] = src[o, idx[o, m, k], k]. An index >= S reads nothing, writes nothing and
// records its flat position in `status`.
#define AUX_U32
#include "common.glsl"

layout(push_constant) uniform Params {
    uint64_t src;
    uint64_t dst;
    uint64_t aux;     // indices
    uint64_t status;
    uint64_t base;  // first output element of this dispatch
    uint64_t n;     // output elements in total
    uint inner;
    uint M;         // output (and index) extent along dim
    uint S;         // source extent along dim
} p;

void main() {
    uint64_t e = first_position(p.base);
    if (e >= p.n) return;
    uint k, m;
    uint64_t o;
    if (WIDE) {
        uint64_t t = e / p.inner;
        k = uint(e % p.inner);
        m = uint(t % p.M);
        o = t / p.M;
    } else {
        uint t = uint(e) / p.inner;
        k = uint(e) % p.inner;
        m = t % p.M;
        o = uint64_t(t / p.M);
    }
    for (uint q = 0; q < ELEMS; ++q, ++e) {
        if (e >= p.n) return;
        uint v = LOAD_AUX(e);
        if (v < p.S) {
            STORE_DST(e, LOAD_SRC((o * p.S + v) * p.inner + k));
        } else {
            REPORT_BAD(clamp_position(e));
        }
        if (++k == p.inner) {
            k = 0;
            if (++m == p.M) { m = 0; ++o; }
        }
    }
}
