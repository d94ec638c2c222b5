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
    uint64_t base;  // first output word of this dispatch
    uint64_t n;     // output words in total
    uint R;         // words per row
    uint n_idx;
    uint dim_size;
} p;

void main() {
    uint64_t e = first_position(p.base);
    if (e >= p.n) return;
    uint r, j;
    uint64_t o;
    if (WIDE) {
        uint64_t t = e / p.R;
        r = uint(e % p.R);
        j = uint(t % p.n_idx);
        o = t / p.n_idx;
    } else {
        uint t = uint(e) / p.R;
        r = uint(e) % p.R;
        j = t % p.n_idx;
        o = uint64_t(t / p.n_idx);
    }
    uint v = LOAD_AUX(j);
    bool ok = v < p.dim_size;
    if (!ok) REPORT_BAD(j);
    uint64_t row = (o * p.dim_size + v) * p.R;
    for (uint q = 0; q < ELEMS; ++q, ++e) {
        if (e >= p.n) return;
        if (ok) STORE_DST(e, LOAD_SRC(row + r));
        if (++r == p.R) {
            r = 0;
            if (++j == p.n_idx) { j = 0; ++o; }
            v = LOAD_AUX(j);
            ok = v < p.dim_size;
            if (!ok && e + 1 < p.n) REPORT_BAD(j);
            row = (o * p.dim_size + v) * p.R;
        }
    }
}
