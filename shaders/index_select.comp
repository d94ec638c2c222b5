#version 450
// IndexSelect as a row copy. The source is [outer, dim_size, row] and the output
// [outer, n_idx, row], where a row is `inner` elements moved as R words of WIDTH bytes (the host
// picks the widest word dividing the row's bytes). Output word e = (o * n_idx + j) * R + r takes
// source word (o * dim_size + idx[j]) * R + r. An index >= dim_size reads nothing, writes nothing
// and records its position j in `status`.
#define AUX_U32
#include "common.glsl"

layout(push_constant) uniform Params {
    uint64_t src;
    uint64_t dst;
    uint64_t aux;     // indices
    uint64_t status;
    uint64_t base;    // first output word of this dispatch
    uint64_t n;       // output words in total
    uint R;           // words per row
    uint n_idx;
    uint dim_size;
} p;

// Sequential mapping with rows a multiple of ELEMS words (the host sets it): each invocation's
// ELEMS positions then lie in one row and all inside or all past the end (tiles start at a
// multiple of ELEMS), so it loads one index and copies ELEMS words with no per-step checks. A
// specialisation constant, not a branch: CPU devices such as lavapipe run both sides of every
// branch under a lane mask, so the general path would cost as much as before.
layout(constant_id = 5) const bool ROWS_ALIGNED = false;

// U: the position type, 32-bit unless WIDE (source and output words < 2**32).
#define SELECT_ALIGNED(U)                                                       \
    U e = POSITION(U, 0);                                                       \
    if (e >= U(p.n)) return;                                                    \
    U t = e / U(p.R);                                                           \
    uint j = uint(t % U(p.n_idx));                                              \
    uint v = LOAD_AUX(j);                                                       \
    if (v >= p.dim_size) {                                                      \
        REPORT_BAD(j);                                                          \
        return;                                                                 \
    }                                                                           \
    U from = ((t / U(p.n_idx)) * U(p.dim_size) + U(v)) * U(p.R) + e % U(p.R);   \
    for (uint q = 0; q < ELEMS; ++q) STORE_DST(e + U(q), LOAD_SRC(from + U(q)));

#define SELECT(U)                                                               \
    U n = U(p.n);                                                               \
    if (COALESCED) {                                                            \
        for (uint q = 0; q < ELEMS; ++q) {                                      \
            U e = POSITION(U, q);                                               \
            if (e >= n) return;                                                 \
            U t = e / U(p.R);                                                   \
            uint j = uint(t % U(p.n_idx));                                      \
            uint v = LOAD_AUX(j);                                               \
            if (v < p.dim_size) {                                               \
                U row = ((t / U(p.n_idx)) * U(p.dim_size) + U(v)) * U(p.R);     \
                STORE_DST(e, LOAD_SRC(row + e % U(p.R)));                       \
            } else {                                                            \
                REPORT_BAD(j);                                                  \
            }                                                                   \
        }                                                                       \
        return;                                                                 \
    }                                                                           \
    U e = POSITION(U, 0);                                                       \
    if (e >= n) return;                                                         \
    U t = e / U(p.R);                                                           \
    uint r = uint(e % U(p.R));                                                  \
    uint j = uint(t % U(p.n_idx));                                              \
    U o = t / U(p.n_idx);                                                       \
    uint v = LOAD_AUX(j);                                                       \
    bool ok = v < p.dim_size;                                                   \
    uint bad = ok ? NO_BAD : j; /* reported once, after the loop (see gather.comp) */ \
    U row = (o * U(p.dim_size) + U(v)) * U(p.R);                                \
    for (uint q = 0; q < ELEMS; ++q, ++e) {                                     \
        if (e >= n) break;                                                      \
        if (ok) STORE_DST(e, LOAD_SRC(row + U(r)));                             \
        if (++r == p.R) {                                                       \
            r = 0;                                                              \
            if (++j == p.n_idx) { j = 0; ++o; }                                 \
            if (e + 1 < n) {                                                    \
                v = LOAD_AUX(j);                                                \
                ok = v < p.dim_size;                                            \
                if (!ok) bad = min(bad, j);                                     \
                row = (o * U(p.dim_size) + U(v)) * U(p.R);                      \
            }                                                                   \
        }                                                                       \
    }                                                                           \
    if (bad != NO_BAD) REPORT_BAD(bad);

void select_wide() { SELECT(uint64_t) }
void select_narrow() { SELECT(uint) }
void select_aligned_wide() { SELECT_ALIGNED(uint64_t) }
void select_aligned_narrow() { SELECT_ALIGNED(uint) }

void main() {
    if (ROWS_ALIGNED && !COALESCED) {
        if (WIDE) select_aligned_wide(); else select_aligned_narrow();
    } else {
        if (WIDE) select_wide(); else select_narrow();
    }
}
