#version 450
// select_fill for narrow rows (16-128 bytes: ROW_WORDS of 1-8 16-byte words): IndexSelect, then
// MaskedFill of its result, in one pass, as select_fill.comp does, but shaped for rows so short
// that every row is a random read of a few words (W3's 64-byte rows: 4 words).
//
// A row is moved by LANES neighbouring invocations (specialisation constant 11; 1, 2, 4 or 8,
// dividing ROW_WORDS), each taking LANE_WORDS = ROW_WORDS / LANES of its words, interleaved (word
// w * LANES + lane) so each load instruction of a row's lanes reads neighbouring words. Each
// invocation moves ELEMS rows (constant 1), ROWS_STEP = workgroup size / LANES rows apart, in four
// phases: every row's index, then every data word, then every mask byte, then every store. The
// loops have constant trip counts and no early exit, so after specialisation they unroll and the
// words stay in registers: ELEMS * LANE_WORDS loads in flight per invocation where select_fill's
// walk keeps one (its store may alias the next load; here `restrict` says they do not: the output
// is never an input). With SHUFFLE (constant 12) one lane of a row reads its index and the others
// take it by subgroup shuffle (a row's lanes lie in one subgroup: LANES divides the subgroup size
// and the workgroup size is a multiple of it).
//
// Output word e = t * ROW_WORDS + k (row t = o * n_idx + j) takes source word
// (o * dim_size + idx[j]) * ROW_WORDS + k, then the fill's bits where the element's mask byte is
// set (mask.glsl; with MASK_BY_ROW, constant 10, one byte per row, as select_fill's walk reads a
// row mask (N, 1)). An index >= dim_size writes nothing of its row and records its position j in
// the select's status slot. Device addresses only; the push block is select_fill's.
#define OWN_BUFFERS
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#include "mask.glsl"

layout(push_constant) uniform Params {
    uint64_t src;
    uint64_t dst;
    uint64_t aux;     // indices (U32)
    uint64_t status;
    uint64_t base;    // first output word of this dispatch (a multiple of a workgroup's words)
    uint64_t n;       // output words in total
    uvec4 fill;       // the fill value repeated over 16 bytes
    uint64_t mask;    // the mask's bytes (mask.glsl)
    uint R;           // words per row (ROW_WORDS)
    uint n_idx;
    uint dim_size;
    uint mask_div[4]; // the mask's dense runs (mask.glsl), innermost first
    uint mask_ext[4];
} p;

layout(buffer_reference, std430, buffer_reference_align = 16) restrict readonly buffer SrcWord { uvec4 w; };
layout(buffer_reference, std430, buffer_reference_align = 16) restrict writeonly buffer DstWord { uvec4 w; };
layout(buffer_reference, std430, buffer_reference_align = 4) restrict readonly buffer Index { uint v; };
layout(buffer_reference, std430, buffer_reference_align = MASK_BYTES) restrict readonly buffer OneMask { MASKWORD m; };
layout(buffer_reference, std430, buffer_reference_align = 1) restrict readonly buffer OneMaskByte { uint8_t b; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Status { uint first_bad; };
#define LOAD_MASK_WORD(i) OneMask(p.mask + uint64_t(i) * uint64_t(MASK_BYTES)).m
#define LOAD_MASK_BYTE(i) OneMaskByte(p.mask + uint64_t(i)).b

layout(constant_id = 9) const uint ROW_WORDS = 4;
layout(constant_id = 10) const bool MASK_BY_ROW = false;
layout(constant_id = 11) const uint LANES = 1;
layout(constant_id = 12) const bool SHUFFLE = false;
const uint LANE_WORDS = ROW_WORDS / LANES;
// register arrays: at most MAX_ROWS rows and MAX_WORDS words an invocation (the host keeps
// ELEMS <= MAX_ROWS and ELEMS * LANE_WORDS <= MAX_WORDS)
const uint MAX_ROWS = 16u;
const uint MAX_WORDS = 16u;

#define SELECT_FILL_ROWS(U)                                                       \
    const uint ROWS_STEP = gl_WorkGroupSize.x / LANES;                            \
    uint lane = gl_LocalInvocationID.x % LANES;                                   \
    U rows = U(p.n) / U(ROW_WORDS);                                               \
    U first = U(p.base) / U(ROW_WORDS) + U(gl_WorkGroupID.x) * U(ROWS_STEP * ELEMS) \
        + U(gl_LocalInvocationID.x / LANES);                                      \
    U from_[MAX_ROWS];                                                            \
    bool ok_[MAX_ROWS];                                                           \
    for (uint q = 0u; q < ELEMS; ++q) {                                           \
        U t = first + U(q * ROWS_STEP);                                           \
        U o = t / U(p.n_idx);                                                     \
        uint j = uint(t - o * U(p.n_idx));                                        \
        uint v = 0u;                                                              \
        if (t < rows && (!SHUFFLE || lane == 0u)) v = Index(p.aux + uint64_t(j) * 4ul).v; \
        if (SHUFFLE) v = subgroupShuffle(v, gl_SubgroupInvocationID & ~(LANES - 1u)); \
        ok_[q] = t < rows && v < p.dim_size;                                      \
        if (t < rows && v >= p.dim_size && lane == 0u)                            \
            atomicMin(Status(p.status).first_bad, j);                             \
        from_[q] = (o * U(p.dim_size) + U(v)) * U(ROW_WORDS) + U(lane);           \
    }                                                                             \
    uvec4 words_[MAX_WORDS];                                                      \
    for (uint q = 0u; q < ELEMS; ++q)                                             \
        for (uint w = 0u; w < LANE_WORDS; ++w)                                    \
            if (ok_[q])                                                           \
                words_[q * LANE_WORDS + w] =                                      \
                    SrcWord(p.src + uint64_t(from_[q] + U(w * LANES)) * 16ul).w;  \
    for (uint q = 0u; q < ELEMS; ++q) {                                           \
        U t = first + U(q * ROWS_STEP);                                           \
        if (!ok_[q]) continue;                                                    \
        uvec4 row_sel = uvec4(0u);                                                \
        if (MASK_BY_ROW) {                                                        \
            uint at_;                                                             \
            MASK_OFFSET(U, t, p.mask_div, p.mask_ext, at_)                        \
            row_sel = uvec4(uint(LOAD_MASK_BYTE(at_)) != 0u ? 0xFFFFFFFFu : 0u);   \
        }                                                                         \
        for (uint w = 0u; w < LANE_WORDS; ++w) {                                  \
            U e = t * U(ROW_WORDS) + U(w * LANES + lane);                         \
            uvec4 sel = row_sel;                                                  \
            if (!MASK_BY_ROW) {                                                   \
                MASK_SELECTOR(U, e, p.mask_div, p.mask_ext, sel)                  \
            }                                                                     \
            uvec4 data = words_[q * LANE_WORDS + w];                              \
            words_[q * LANE_WORDS + w] = (data & ~sel) | (p.fill & sel);          \
        }                                                                         \
    }                                                                             \
    for (uint q = 0u; q < ELEMS; ++q) {                                           \
        U t = first + U(q * ROWS_STEP);                                           \
        for (uint w = 0u; w < LANE_WORDS; ++w)                                    \
            if (ok_[q])                                                           \
                DstWord(p.dst + uint64_t(t * U(ROW_WORDS) + U(w * LANES + lane)) * 16ul).w = \
                    words_[q * LANE_WORDS + w];                                   \
    }

void select_fill_rows_wide() { SELECT_FILL_ROWS(uint64_t) }
void select_fill_rows_narrow() { SELECT_FILL_ROWS(uint) }

void main() {
    if (WIDE) select_fill_rows_wide(); else select_fill_rows_narrow();
}
