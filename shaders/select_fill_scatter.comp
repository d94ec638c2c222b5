#version 450
// A probe (benchmarks/probes/w3_kernel_probe.py): select_fill in source order. Sorted position k
// reads source row from[k] (FROM_IDENTITY: row k, an index that permutes the rows) and writes
// output row order[k], where order is the indices' argsort and from = indices[order]: reads in
// row order, writes scattered, where select_fill reads scattered and writes in order. A row mask
// (one byte per row) is read at the output row (MASK_AT 1) or at k (MASK_AT 2: a mask permuted
// beforehand); a masked row is not read. Rows are R 16-byte words; device addresses only.
#define OWN_BUFFERS
#include "common.glsl"

layout(push_constant) uniform Params {
    uint64_t src;
    uint64_t dst;
    uint64_t order;   // U32: the output row of sorted position k
    uint64_t from;    // U32: the source row of sorted position k (read unless FROM_IDENTITY)
    uint64_t base;    // first word of this dispatch
    uint64_t n;       // words in total (rows x R)
    uvec4 fill;       // the fill value repeated over 16 bytes
    uint64_t mask;    // one byte per row
    uint R;           // words per row
} p;

layout(constant_id = 5) const uint MASK_AT = 1u;      // 0: no mask; 1: at the output row; 2: at k
layout(constant_id = 6) const bool FROM_IDENTITY = true;
layout(constant_id = 7) const uint ROW_WORDS = 0u;    // words per row known to the build (0: p.R)

layout(buffer_reference, std430, buffer_reference_align = 16) buffer OneVec4 { uvec4 w; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OneU32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer OneMaskByte { uint8_t b; };

#define SCATTER(U)                                                              \
    U n = U(p.n);                                                               \
    uint R = ROW_WORDS != 0u ? ROW_WORDS : p.R;                                 \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        U e = POSITION(U, q);                                                   \
        if (e >= n) return;                                                     \
        U k = e / U(R);                                                         \
        uint r = uint(e - k * U(R));                                            \
        uint t = OneU32(p.order + uint64_t(k) * 4ul).v;                         \
        bool filled = false;                                                    \
        if (MASK_AT != 0u) {                                                    \
            uint64_t at = MASK_AT == 1u ? uint64_t(t) : uint64_t(k);            \
            filled = uint(OneMaskByte(p.mask + at).b) != 0u;                    \
        }                                                                       \
        uvec4 out_ = p.fill;                                                    \
        if (!filled) {                                                          \
            U s = FROM_IDENTITY ? k : U(OneU32(p.from + uint64_t(k) * 4ul).v);  \
            out_ = OneVec4(p.src + (uint64_t(s) * uint64_t(R) + uint64_t(r)) * 16ul).w; \
        }                                                                       \
        OneVec4(p.dst + (uint64_t(t) * uint64_t(R) + uint64_t(r)) * 16ul).w = out_; \
    }

void scatter_wide() { SCATTER(uint64_t) }
void scatter_narrow() { SCATTER(uint) }

void main() {
    if (WIDE) scatter_wide(); else scatter_narrow();
}
