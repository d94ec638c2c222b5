#version 450
// IndexSelect, then MaskedFill of its result, in one pass: what the Vulkan executor records for a
// select whose only reader is a masked_fill (see executor.py), so the selected rows are never
// written to device memory and read back. On a discrete GPU reading and writing host memory
// (zero-copy), one kernel that does both moves data both ways over the link at once, where two
// kernels in turn move it one way at a time.
//
// Rows are R 16-byte words (the host fuses only rows whose bytes are a multiple of 16): output
// word e = (o * n_idx + j) * R + r takes source word (o * dim_size + idx[j]) * R + r, then every
// element (WIDTH bytes) of it whose mask byte is set takes the fill's bits (mask.glsl), as
// masked_fill.comp does. An index >= dim_size writes nothing and records its position j in the
// select's status slot. Device addresses only (five buffers; the storage-buffer set has four).
// A mask broadcast from a smaller array is read in place (mask.glsl: MASK_MODE and the runs in
// mask_div / mask_ext): a row mask (N, 1) over rows of whole words costs one byte per word.
//
// ROW_WALK (specialisation constant 9, the host's default): each invocation divides once, for
// its first position, and then walks its others (a fixed stride: 1 word sequential, the
// workgroup size coalesced) carrying the row r, the index position j and the outer o forward by
// compare-and-subtract: no runtime division per word, where the general path does five (e / R,
// e % R, t % n_idx, t / n_idx and the mask's). With MASK_BY_ROW (constant 10: the mask is the
// same over each output row, its runs in mask_div counted in rows, as a row mask (N, 1) is) the
// mask byte is found from the output row t, for a row mask with no division at all.
#define OWN_BUFFERS
#include "common.glsl"
#include "mask.glsl"

layout(push_constant) uniform Params {
    uint64_t src;
    uint64_t dst;
    uint64_t aux;     // indices (U32)
    uint64_t status;
    uint64_t base;    // first output word of this dispatch
    uint64_t n;       // output words in total
    uvec4 fill;       // the fill value repeated over 16 bytes
    uint64_t mask;    // one byte per output element
    uint R;           // words per row
    uint n_idx;
    uint dim_size;
    uint mask_div[4]; // the mask's dense runs (mask.glsl), innermost first
    uint mask_ext[4];
} p;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer OneVec4 { uvec4 w; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OneU32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = MASK_BYTES) buffer OneMask { MASKWORD m; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Status { uint first_bad; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer OneMaskByte { uint8_t b; };
#define LOAD_MASK_WORD(i) OneMask(p.mask + uint64_t(i) * uint64_t(MASK_BYTES)).m
#define LOAD_MASK_BYTE(i) OneMaskByte(p.mask + uint64_t(i)).b

// U: the position type, 32-bit unless WIDE (source and output words < 2**32).
#define SELECT_FILL(U)                                                          \
    U n = U(p.n);                                                               \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        U e = POSITION(U, q);                                                   \
        if (e >= n) return;                                                     \
        U t = e / U(p.R);                                                       \
        uint j = uint(t % U(p.n_idx));                                          \
        uint v = OneU32(p.aux + uint64_t(j) * 4ul).v;                           \
        if (v >= p.dim_size) {                                                  \
            atomicMin(Status(p.status).first_bad, j);                           \
            continue;                                                           \
        }                                                                       \
        U from = ((t / U(p.n_idx)) * U(p.dim_size) + U(v)) * U(p.R) + e % U(p.R); \
        uvec4 sel;                                                              \
        MASK_SELECTOR(U, e, p.mask_div, p.mask_ext, sel)                        \
        STORE_FILLED(e, sel, from)                                              \
    }

layout(constant_id = 9) const bool ROW_WALK = false;
layout(constant_id = 10) const bool MASK_BY_ROW = false;
layout(constant_id = 11) const bool SKIP_FILLED = true;

// Whether the selector covers the whole word, so that its source need not be read (SKIP_FILLED).
#define FILLED_WHOLE(sel) (SKIP_FILLED && all(equal(sel, uvec4(0xFFFFFFFFu))))

// The selector of output word e in output row t: by row (MASK_BY_ROW: the row's mask byte) or by
// word (MASK_SELECTOR).
#define SELECTOR_OF(U, t, e, sel)                                               \
    if (MASK_BY_ROW) {                                                          \
        uint at_;                                                               \
        MASK_OFFSET(U, t, p.mask_div, p.mask_ext, at_)                          \
        sel = uvec4(uint(LOAD_MASK_BYTE(at_)) != 0u ? 0xFFFFFFFFu : 0u);         \
    } else {                                                                    \
        MASK_SELECTOR(U, e, p.mask_div, p.mask_ext, sel)                        \
    }

// Output word e's bits: the fill's where the selector is set, source word `from`'s elsewhere. A
// word the mask covers whole (every element filled) is not read (SKIP_FILLED): a masked row costs
// its write alone, and for rows picked at random (each a random read) that is most of its cost.
// (A branch, not ?:, so that the compiler cannot hoist the load above the test.)
#define STORE_FILLED(e, sel, from)                                              \
    {                                                                           \
        uvec4 out_ = p.fill;                                                    \
        if (!FILLED_WHOLE(sel)) {                                               \
            uvec4 data_ = OneVec4(p.src + uint64_t(from) * 16ul).w;             \
            out_ = (data_ & ~(sel)) | (p.fill & (sel));                         \
        }                                                                       \
        OneVec4(p.dst + uint64_t(e) * 16ul).w = out_;                           \
    }

// The walk's start (e, R and n_idx given): e's row t, word in row r, outer o and index position
// j, and what one step carries; and one step (q > 0), leaving by END (return or break) past n.
#define WALK_START(U)                                                           \
    U t = e / U(R);                                                             \
    uint r = uint(e - t * U(R));                                                \
    U o = t / U(n_idx);                                                         \
    uint j = uint(t - o * U(n_idx));                                            \
    uint rows_per_step = STEP / R, words_past = STEP - rows_per_step * R;
#define WALK_ADVANCE(U, END)                                                    \
    if (q > 0) {                                                                \
        e += U(STEP);                                                           \
        if (e >= n) END;                                                        \
        r += words_past;                                                        \
        uint rows_ = rows_per_step;                                             \
        if (r >= R) { r -= R; ++rows_; }                                        \
        t += U(rows_);                                                          \
        j += rows_;                                                             \
        while (j >= n_idx) { j -= n_idx; ++o; }                                 \
    }

// The walk: positions e of this invocation advance by STEP words; (o, j, r) is e's (outer, index
// position, word in row) and t = o * n_idx + j its output row, carried forward without dividing.
// j's carry is a loop: a step may cross several rows (64-byte rows: 16 per step of 64 words), and
// more than n_idx of them only when n_idx is below the step (then it runs step / n_idx times).
#define SELECT_FILL_WALK(U)                                                     \
    const uint STEP = COALESCED ? gl_WorkGroupSize.x : 1u;                      \
    U n = U(p.n);                                                               \
    U e = POSITION(U, 0);                                                       \
    if (e >= n) return;                                                         \
    uint R = p.R, n_idx = p.n_idx;                                              \
    WALK_START(U)                                                               \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        WALK_ADVANCE(U, return)                                                 \
        uint v = OneU32(p.aux + uint64_t(j) * 4ul).v;                           \
        if (v >= p.dim_size) {                                                  \
            atomicMin(Status(p.status).first_bad, j);                           \
            continue;                                                           \
        }                                                                       \
        U from = (o * U(p.dim_size) + U(v)) * U(R) + U(r);                      \
        uvec4 sel;                                                              \
        SELECTOR_OF(U, t, e, sel)                                               \
        STORE_FILLED(e, sel, from)                                              \
    }

// LOADS_FIRST (specialisation constant 12, the host's default on GPUs): the walk in three passes
// over the invocation's positions: every index and mask load first, then every source load, then
// every store. A source word is read only once its mask byte says the word is not filled whole
// (STORE_FILLED), so taken in turn each position would wait for its mask and then its source; in
// passes the waits overlap across positions. That matters most where the mask is host memory read
// over the link (a host mask read in place, kept): its latency is several times HBM's. The loops
// run to the constant ELEMS, so the per-position arrays stay in registers once unrolled.
#define SELECT_FILL_WALK_PASSES(U)                                              \
    const uint STEP = COALESCED ? gl_WorkGroupSize.x : 1u;                      \
    U n = U(p.n);                                                               \
    uint R = p.R, n_idx = p.n_idx;                                              \
    U tile_t = U(0);                                                            \
    if (MASK_BY_ROW && MASK_TILE) {                                             \
        U tile_e = U(p.base) + U(gl_WorkGroupID.x) * U(gl_WorkGroupSize.x * ELEMS); \
        if (tile_e >= n) return;                                                \
        U tile_end = min(tile_e + U(gl_WorkGroupSize.x * ELEMS), n) - U(1);     \
        tile_t = tile_e / U(R);                                                 \
        uint rows_ = uint(tile_end / U(R) - tile_t) + 1u;                       \
        for (uint k = gl_LocalInvocationID.x; k < rows_; k += gl_WorkGroupSize.x) { \
            uint at_;                                                           \
            MASK_OFFSET(U, tile_t + U(k), p.mask_div, p.mask_ext, at_)          \
            mask_tile[k] = uint(LOAD_MASK_BYTE(at_));                           \
        }                                                                       \
        memoryBarrierShared();                                                  \
        barrier();                                                              \
    }                                                                           \
    U e = POSITION(U, 0);                                                       \
    if (e >= n) return;                                                         \
    U first = e;                                                                \
    WALK_START(U)                                                               \
    uint live = 0u;                                                             \
    uint v_[ELEMS], j_[ELEMS], r_[ELEMS];                                       \
    U o_[ELEMS];                                                                \
    uvec4 sel_[ELEMS], data_[ELEMS];                                            \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        WALK_ADVANCE(U, break)                                                  \
        live = q + 1u;                                                          \
        j_[q] = j; r_[q] = r; o_[q] = o;                                        \
        v_[q] = OneU32(p.aux + uint64_t(j) * 4ul).v;                            \
        if (MASK_BY_ROW && MASK_TILE) {                                         \
            sel_[q] = uvec4(mask_tile[uint(t - tile_t)] != 0u ? 0xFFFFFFFFu : 0u); \
        } else {                                                                \
            SELECTOR_OF(U, t, e, sel_[q])                                       \
        }                                                                       \
    }                                                                           \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        data_[q] = p.fill;                                                      \
        if (q < live && v_[q] < p.dim_size                                      \
            && !FILLED_WHOLE(sel_[q])) {                                        \
            U from = (o_[q] * U(p.dim_size) + U(v_[q])) * U(R) + U(r_[q]);      \
            data_[q] = OneVec4(p.src + uint64_t(from) * 16ul).w;                \
        }                                                                       \
    }                                                                           \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        if (q >= live) break;                                                   \
        if (v_[q] >= p.dim_size) {                                              \
            atomicMin(Status(p.status).first_bad, j_[q]);                       \
            continue;                                                           \
        }                                                                       \
        OneVec4(p.dst + uint64_t(first + U(q) * U(STEP)) * 16ul).w =            \
            (data_[q] & ~sel_[q]) | (p.fill & sel_[q]);                         \
    }

layout(constant_id = 12) const bool LOADS_FIRST = true;
// MASK_TILE (constant 13, with LOADS_FIRST and MASK_BY_ROW): the workgroup reads the mask bytes of
// all its rows at once before the walk, neighbouring invocations neighbouring bytes, into
// mask_tile (its rows from tile_t on), and each position takes its byte from there. A host mask
// read in place over the link then comes in whole sectors, a few requests a workgroup, where
// each step of each subgroup would ask for the few bytes of its own rows (over 64-byte rows: 8).
layout(constant_id = 13) const bool MASK_TILE = true;
shared uint mask_tile[gl_WorkGroupSize.x * ELEMS + 1u];  // a workgroup's rows: at most its words + 1

void select_fill_wide() { SELECT_FILL(uint64_t) }
void select_fill_narrow() { SELECT_FILL(uint) }
void select_fill_walk_wide() { SELECT_FILL_WALK(uint64_t) }
void select_fill_walk_narrow() { SELECT_FILL_WALK(uint) }
void select_fill_passes_wide() { SELECT_FILL_WALK_PASSES(uint64_t) }
void select_fill_passes_narrow() { SELECT_FILL_WALK_PASSES(uint) }

void main() {
    if (ROW_WALK && LOADS_FIRST) {
        if (WIDE) select_fill_passes_wide(); else select_fill_passes_narrow();
    } else if (ROW_WALK) {
        if (WIDE) select_fill_walk_wide(); else select_fill_walk_narrow();
    } else {
        if (WIDE) select_fill_wide(); else select_fill_narrow();
    }
}
