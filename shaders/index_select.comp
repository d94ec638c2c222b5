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

// U: the position type, 32-bit unless WIDE (source and output words < 2**32).
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
    if (!ok) REPORT_BAD(j);                                                     \
    U row = (o * U(p.dim_size) + U(v)) * U(p.R);                                \
    for (uint q = 0; q < ELEMS; ++q, ++e) {                                     \
        if (e >= n) return;                                                     \
        if (ok) STORE_DST(e, LOAD_SRC(row + U(r)));                             \
        if (++r == p.R) {                                                       \
            r = 0;                                                              \
            if (++j == p.n_idx) { j = 0; ++o; }                                 \
            if (e + 1 < n) {                                                    \
                v = LOAD_AUX(j);                                                \
                ok = v < p.dim_size;                                            \
                if (!ok) REPORT_BAD(j);                                         \
                row = (o * U(p.dim_size) + U(v)) * U(p.R);                      \
            }                                                                   \
        }                                                                       \
    }

void select_wide() { SELECT(uint64_t) }
void select_narrow() { SELECT(uint) }

void main() {
    if (WIDE) select_wide(); else select_narrow();
}
