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
    uint64_t base;    // first output element of this dispatch
    uint64_t n;       // output elements in total
    uint inner;
    uint M;           // output (and index) extent along dim
    uint S;           // source extent along dim
} p;

// U: the position type, 32-bit unless WIDE (source and output elements < 2**32).
#define GATHER(U)                                                               \
    U n = U(p.n);                                                               \
    if (COALESCED) {                                                            \
        for (uint q = 0; q < ELEMS; ++q) {                                      \
            U e = POSITION(U, q);                                               \
            if (e >= n) return;                                                 \
            uint v = LOAD_AUX(e);                                               \
            if (v < p.S) {                                                      \
                U t = e / U(p.inner);                                           \
                U o = t / U(p.M);                                               \
                STORE_DST(e, LOAD_SRC((o * U(p.S) + U(v)) * U(p.inner) + e % U(p.inner))); \
            } else {                                                            \
                REPORT_BAD(clamp_position(uint64_t(e)));                        \
            }                                                                   \
        }                                                                       \
        return;                                                                 \
    }                                                                           \
    U e = POSITION(U, 0);                                                       \
    if (e >= n) return;                                                         \
    U t = e / U(p.inner);                                                       \
    uint k = uint(e % U(p.inner));                                              \
    uint m = uint(t % U(p.M));                                                  \
    U o = t / U(p.M);                                                           \
    for (uint q = 0; q < ELEMS; ++q, ++e) {                                     \
        if (e >= n) return;                                                     \
        uint v = LOAD_AUX(e);                                                   \
        if (v < p.S) {                                                          \
            STORE_DST(e, LOAD_SRC((o * U(p.S) + U(v)) * U(p.inner) + U(k)));    \
        } else {                                                                \
            REPORT_BAD(clamp_position(uint64_t(e)));                            \
        }                                                                       \
        if (++k == p.inner) {                                                   \
            k = 0;                                                              \
            if (++m == p.M) { m = 0; ++o; }                                     \
        }                                                                       \
    }

void gather_wide() { GATHER(uint64_t) }
void gather_narrow() { GATHER(uint) }

void main() {
    if (WIDE) gather_wide(); else gather_narrow();
}
