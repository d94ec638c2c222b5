#version 450
// MaskedFill: out[e] = mask[e] != 0 ? fill : data[e], moved 16 bytes at a time.
//
// Data and output are read and written as 16-byte words (16 / WIDTH elements each) with the
// mask bytes of those elements read as one MASKWORD; a bitwise select per element lane keeps the
// data's bits or takes the fill's (the host passes the fill value repeated across 16 bytes).
// Buffers are 16-byte aligned and rounded up to 16 bytes, so the last word may cover padding
// past the last element: the host copies back only the real bytes.
#define OWN_BUFFERS
#include "common.glsl"

#if WIDTH == 1
#define MASKWORD uvec4
#elif WIDTH == 2
#define MASKWORD uvec2
#elif WIDTH == 4
#define MASKWORD uint
#elif WIDTH == 8
#define MASKWORD uint16_t
#else
#define MASKWORD uint8_t
#endif
const uint MASK_BYTES = 16 / WIDTH;

layout(push_constant) uniform Params {
    uint64_t src;     // device addresses (unused with storage buffers)
    uint64_t dst;
    uint64_t aux;     // mask
    uint64_t status;  // unused
    uint64_t base;    // first 16-byte word of this dispatch
    uint64_t n;       // 16-byte words in total
    uvec4 fill;       // the fill value repeated over 16 bytes
} p;

#ifdef SSBO
layout(std430, set = 0, binding = 0) readonly buffer SrcBuf { uvec4 w[]; } src_buf;
layout(std430, set = 0, binding = 1) writeonly buffer DstBuf { uvec4 w[]; } dst_buf;
layout(std430, set = 0, binding = 2) readonly buffer MaskBuf { MASKWORD m[]; } mask_buf;
#define LOAD_DATA(i) src_buf.w[uint(i)]
#define STORE_OUT(i, value) dst_buf.w[uint(i)] = (value)
#define LOAD_MASK(i) mask_buf.m[uint(i)]
#else
layout(buffer_reference, std430, buffer_reference_align = 16) buffer OneVec4 { uvec4 w; };
layout(buffer_reference, std430, buffer_reference_align = MASK_BYTES) buffer OneMask { MASKWORD m; };
#define LOAD_DATA(i) OneVec4(p.src + uint64_t(i) * 16ul).w
#define STORE_OUT(i, value) OneVec4(p.dst + uint64_t(i) * 16ul).w = (value)
#define LOAD_MASK(i) OneMask(p.aux + uint64_t(i) * uint64_t(MASK_BYTES)).m
#endif

// 0xFF in every byte of x that is nonzero, 0x00 elsewhere.
uint nonzero_bytes(uint x) {
    x |= x >> 4;
    x |= x >> 2;
    x |= x >> 1;
    return (x & 0x01010101u) * 0xFFu;
}

// All-ones over the bytes of every element whose mask byte is set.
uvec4 selector(MASKWORD m) {
#if WIDTH == 1
    return uvec4(nonzero_bytes(m.x), nonzero_bytes(m.y), nonzero_bytes(m.z), nonzero_bytes(m.w));
#elif WIDTH == 2
    uint a = nonzero_bytes(m.x), b = nonzero_bytes(m.y);
    return uvec4((a & 0xFFu) * 0x0101u | (a >> 8 & 0xFFu) * 0x01010000u,
                 (a >> 16 & 0xFFu) * 0x0101u | (a >> 24) * 0x01010000u,
                 (b & 0xFFu) * 0x0101u | (b >> 8 & 0xFFu) * 0x01010000u,
                 (b >> 16 & 0xFFu) * 0x0101u | (b >> 24) * 0x01010000u);
#elif WIDTH == 4
    uint a = nonzero_bytes(m);
    return uvec4((a & 0xFFu) * 0x01010101u, (a >> 8 & 0xFFu) * 0x01010101u,
                 (a >> 16 & 0xFFu) * 0x01010101u, (a >> 24) * 0x01010101u);
#elif WIDTH == 8
    uint lo = (uint(m) & 0xFFu) != 0u ? 0xFFFFFFFFu : 0u;
    uint hi = (uint(m) >> 8) != 0u ? 0xFFFFFFFFu : 0u;
    return uvec4(lo, lo, hi, hi);
#else
    return uvec4(uint(m) != 0u ? 0xFFFFFFFFu : 0u);
#endif
}

// U: the position type, 32-bit unless WIDE (words < 2**32).
#define FILL(U)                                                                 \
    U n = U(p.n);                                                               \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        U e = POSITION(U, q);                                                   \
        if (e >= n) return;                                                     \
        uvec4 sel = selector(LOAD_MASK(e));                                     \
        STORE_OUT(e, (LOAD_DATA(e) & ~sel) | (p.fill & sel));                   \
    }

void fill_wide() { FILL(uint64_t) }
void fill_narrow() { FILL(uint) }

void main() {
    if (WIDE) fill_wide(); else fill_narrow();
}
