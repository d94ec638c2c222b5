#version 450
// Contiguize: copy a strided view (any strides: positive, negative, zero; any offset; rank <= 8)
// into a fresh row-major buffer. Output position e has the row-major coordinates c of e in
// `shape`; it reads source element offset + sum(c[d] * strides[d]). The host collapses mergeable
// dims, drops extent-1 dims and may widen the word (WIDTH) when the innermost dim is dense.
#include "common.glsl"

layout(constant_id = 3) const int RANK = 1;

layout(push_constant) uniform Params {
    uint64_t src;        // device addresses (unused with storage buffers)
    uint64_t dst;
    uint64_t base;       // first output element of this dispatch
    uint64_t n;          // output elements in total
    uint shape[8];
    int64_t strides[8];  // in elements; strides[RANK] holds the view's offset (see below)
} p;

// The walk, for an unsigned position type U and a signed offset type S (32-bit unless WIDE:
// 64-bit integer arithmetic costs several times more on lavapipe). The view's offset rides in
// the unused slot strides[RANK]; at rank 8 there is none: the host then uses device addresses
// with the offset folded into src and WIDE set (the offset may go negative there).
#define WALK(U, S)                                                              \
    U n = U(p.n);                                                               \
    if (COALESCED) {                                                            \
        for (uint q = 0; q < ELEMS; ++q) {                                      \
            U e = POSITION(U, q);                                               \
            if (e >= n) return;                                                 \
            S off = RANK < 8 ? S(p.strides[min(RANK, 7)]) : S(0);               \
            U t = e;                                                            \
            for (int d = RANK - 1; d >= 0; --d) {                               \
                off += S(t % U(p.shape[d])) * S(p.strides[d]);                  \
                t /= U(p.shape[d]);                                             \
            }                                                                   \
            STORE_DST(e, LOAD_SRC(off));                                        \
        }                                                                       \
        return;                                                                 \
    }                                                                           \
    U e = POSITION(U, 0);                                                       \
    if (e >= n) return;                                                         \
    int c[8];                                                                   \
    S off = RANK < 8 ? S(p.strides[min(RANK, 7)]) : S(0);                       \
    U t = e;                                                                    \
    for (int d = RANK - 1; d >= 0; --d) {                                       \
        c[d] = int(t % U(p.shape[d]));                                          \
        t /= U(p.shape[d]);                                                     \
        off += S(c[d]) * S(p.strides[d]);                                       \
    }                                                                           \
    for (uint q = 0; q < ELEMS; ++q, ++e) {                                     \
        if (e >= n) return;                                                     \
        STORE_DST(e, LOAD_SRC(off));                                            \
        c[RANK - 1] += 1;                                                       \
        off += S(p.strides[RANK - 1]);                                          \
        for (int d = RANK - 1; d > 0; --d) {                                    \
            if (uint(c[d]) < p.shape[d]) break;                                 \
            c[d] = 0;                                                           \
            off -= S(p.strides[d]) * S(p.shape[d]);                             \
            c[d - 1] += 1;                                                      \
            off += S(p.strides[d - 1]);                                         \
        }                                                                       \
    }

void walk_wide() { WALK(uint64_t, int64_t) }
void walk_narrow() { WALK(uint, int) }

void main() {
    if (WIDE) walk_wide(); else walk_narrow();
}
