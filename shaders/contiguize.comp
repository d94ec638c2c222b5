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

void main() {
    uint64_t e = first_position(p.base);
    if (e >= p.n) return;
    int c[8];
    // The view's offset rides in the unused slot strides[RANK]. At rank 8 there is none: the host
    // then uses device addresses with the offset folded into src (off may go negative there).
    int64_t off = RANK < 8 ? p.strides[min(RANK, 7)] : 0;
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
        STORE_DST(e, LOAD_SRC(off));
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
