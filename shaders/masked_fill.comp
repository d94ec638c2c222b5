#version 450
// MaskedFill: out[e] = mask[e] != 0 ? fill : data[e], moved 16 bytes at a time.
//
// Data and output are read and written as 16-byte words (16 / WIDTH elements each) with the
// mask bytes of those elements read as one MASKWORD; a bitwise select per element lane keeps the
// data's bits or takes the fill's (the host passes the fill value repeated across 16 bytes).
// Buffers are 16-byte aligned and rounded up to 16 bytes, so the last word may cover padding
// past the last element: the host copies back only the real bytes. A mask broadcast from a
// smaller array is read in place (mask.glsl: MASK_MODE and the runs in mask_div / mask_ext).
#define OWN_BUFFERS
#include "common.glsl"
#include "mask.glsl"

layout(push_constant) uniform Params {
    uint64_t src;     // device addresses (unused with storage buffers)
    uint64_t dst;
    uint64_t aux;     // mask
    uint64_t status;  // unused
    uint64_t base;    // first 16-byte word of this dispatch
    uint64_t n;       // 16-byte words in total
    uvec4 fill;       // the fill value repeated over 16 bytes
    uint mask_div[4]; // the mask's dense runs (mask.glsl), innermost first
    uint mask_ext[4];
} p;

#ifdef SSBO
layout(std430, set = 0, binding = 0) readonly buffer SrcBuf { uvec4 w[]; } src_buf;
layout(std430, set = 0, binding = 1) writeonly buffer DstBuf { uvec4 w[]; } dst_buf;
layout(std430, set = 0, binding = 2) readonly buffer MaskBuf { MASKWORD m[]; } mask_buf;
layout(std430, set = 0, binding = 2) readonly buffer MaskBytes { uint8_t b[]; } mask_bytes;
#define LOAD_DATA(i) src_buf.w[uint(i)]
#define STORE_OUT(i, value) dst_buf.w[uint(i)] = (value)
#define LOAD_MASK_WORD(i) mask_buf.m[uint(i)]
#define LOAD_MASK_BYTE(i) mask_bytes.b[uint(i)]
#else
layout(buffer_reference, std430, buffer_reference_align = 16) buffer OneVec4 { uvec4 w; };
layout(buffer_reference, std430, buffer_reference_align = MASK_BYTES) buffer OneMask { MASKWORD m; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer OneMaskByte { uint8_t b; };
#define LOAD_DATA(i) OneVec4(p.src + uint64_t(i) * 16ul).w
#define STORE_OUT(i, value) OneVec4(p.dst + uint64_t(i) * 16ul).w = (value)
#define LOAD_MASK_WORD(i) OneMask(p.aux + uint64_t(i) * uint64_t(MASK_BYTES)).m
#define LOAD_MASK_BYTE(i) OneMaskByte(p.aux + uint64_t(i)).b
#endif

// U: the position type, 32-bit unless WIDE (words < 2**32).
#define FILL(U)                                                                 \
    U n = U(p.n);                                                               \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        U e = POSITION(U, q);                                                   \
        if (e >= n) return;                                                     \
        uvec4 sel;                                                              \
        MASK_SELECTOR(U, e, p.mask_div, p.mask_ext, sel)                        \
        STORE_OUT(e, (LOAD_DATA(e) & ~sel) | (p.fill & sel));                   \
    }

void fill_wide() { FILL(uint64_t) }
void fill_narrow() { FILL(uint) }

void main() {
    if (WIDE) fill_wide(); else fill_narrow();
}
