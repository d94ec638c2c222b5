#version 450
// MaskedFill: out[e] = mask[e] != 0 ? fill : data[e]. The mask is one byte per element (BOOL);
// `fill` holds the fill value's bits in its low WIDTH bytes.
#define AUX_U8
#include "common.glsl"

layout(push_constant) uniform Params {
    uint64_t src;
    uint64_t dst;
    uint64_t aux;     // mask
    uint64_t status;  // unused
    uint64_t base;  // first element of this dispatch
    uint64_t n;     // elements in total
    uvec4 fill;
} p;

void main() {
    uint64_t e = first_position(p.base);
    WORD f = FILL_WORD(p.fill);
    for (uint q = 0; q < ELEMS; ++q, ++e) {
        if (e >= p.n) return;
        STORE_DST(e, LOAD_AUX(e) != uint8_t(0) ? f : LOAD_SRC(e));
    }
}
