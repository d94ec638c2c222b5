#version 450
// Contiguize: copy a strided view (any strides: positive, negative, zero; any offset; rank <= 8)
// into a fresh row-major buffer. Output position e has the row-major coordinates c of e in
// `shape`; it reads the element at src + offset*WIDTH + sum(c[d] * strides[d]) * WIDTH.
// The host folds the offset into `src`, collapses mergeable dims and drops extent-1 dims.
#include "common.glsl"

layout(constant_id = 3) const int RANK = 1;

layout(push_constant) uniform Params {
    uint64_t src;        // address of the view's element [0, …, 0]
    uint64_t dst;           // contiguous output
    uint64_t base;       // first output element of this dispatch
    uint64_t n;          // output elements in total
    uint shape[8];
    int64_t strides[8];  // in elements
} p;

void main() {
    uint64_t e = first_position(p.base);
    if (e >= p.n) return;
    int c[8];
    int64_t off = 0;
    if (WIDE) {
        uint64_t t = e;
        for (int d = RANK - 1; d >= 0; --d) {
            c[d] = int(t % uint64_t(p.shape[d]));
            t /= uint64_t(p.shape[d]);
            off += int64_t(c[d]) * p.strides[d];
        }
    } else {
        uint t = uint(e);
        for (int d = RANK - 1; d >= 0; --d) {
            c[d] = int(t % p.shape[d]);
            t /= p.shape[d];
            off += int64_t(c[d]) * p.strides[d];
        }
    }
    for (uint q = 0; q < ELEMS; ++q, ++e) {
        if (e >= p.n) return;
        store_word(p.dst, e, OneWord(p.src + uint64_t(off * WIDTH)).w);
        // step to the next row-major coordinate, carrying into outer dims
        c[RANK - 1] += 1;
        off += p.strides[RANK - 1];
        for (int d = RANK - 1; d > 0; --d) {
            if (uint(c[d]) < p.shape[d]) break;
            c[d] = 0;
            off -= p.strides[d] * int64_t(p.shape[d]);
            c[d - 1] += 1;
            off += p.strides[d - 1];
        }
    }
}
