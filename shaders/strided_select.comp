#version 450
// IndexSelect and Gather reading their source through any layout: strides in elements (words),
// positive, negative (reversed) or zero (broadcast), and a start offset; no Contiguize first.
// The output is row-major in `shape` (rank <= 6 after the host merges dims; DIM is the selected
// dim). Output position e has the coordinates c of e in `shape`; it reads source word
//     offset + sum(c[d] * strides[d] for d != DIM) + v * strides[DIM]
// where v is the index for it: indices[c[DIM]] (index_select) or indices[e] (gather). An index
// >= dim_size reads nothing, writes nothing and records its position (c[DIM], or e for gather).
#define AUX_U32
#include "common.glsl"

layout(constant_id = 3) const int RANK = 1;
layout(constant_id = 5) const int DIM = 0;
// true: one index per output element (gather); false: one per position along DIM (index_select).
layout(constant_id = 6) const bool GATHER = false;
// The output dim each invocation walks, `walk_len` positions of it (the host picks the dim whose
// source stride is smallest when that is not the innermost, and only with the sequential
// mapping): neighbouring invocations then differ in the innermost dim, so they write neighbouring
// words while each reads along its source's densest dim (a transposed source is read row by row).
// -1: the plain walk, ELEMS consecutive positions per invocation. See SELECT_WALK.
layout(constant_id = 7) const int WALK = -1;

layout(push_constant) uniform Params {
    uint64_t src;        // device addresses (unused with storage buffers)
    uint64_t dst;
    uint64_t aux;        // indices
    uint64_t status;
    uint64_t base;       // first output word of this dispatch
    int64_t offset;      // the source view's first word
    int64_t strides[6];  // source strides in words
    uint shape[6];       // output extents (the source's, but `DIM`, which is the index count)
    uint dim_size;       // the source's extent along DIM
    uint walk_len;       // positions of WALK each invocation moves (WALK >= 0; `base` then counts invocations)
} p;

// The walk for an unsigned position type U and a signed offset type S (32-bit unless WIDE).
#define SELECT(U, S)                                                            \
    U n = U(1);                                                                 \
    for (int d = 0; d < RANK; ++d) n *= U(p.shape[d]);                          \
    if (COALESCED) {                                                            \
        for (uint q = 0; q < ELEMS; ++q) {                                      \
            U e = POSITION(U, q);                                               \
            if (e >= n) return;                                                 \
            S off = S(p.offset);                                                \
            uint j = 0u;                                                        \
            U t = e;                                                            \
            for (int d = RANK - 1; d >= 0; --d) {                               \
                uint cd = uint(t % U(p.shape[d]));                              \
                t /= U(p.shape[d]);                                             \
                if (d == DIM) j = cd; else off += S(cd) * S(p.strides[d]);      \
            }                                                                   \
            uint v = GATHER ? LOAD_AUX(e) : LOAD_AUX(j);                        \
            if (v < p.dim_size) {                                               \
                STORE_DST(e, LOAD_SRC(off + S(v) * S(p.strides[DIM])));         \
            } else {                                                            \
                REPORT_BAD(GATHER ? clamp_position(uint64_t(e)) : j);           \
            }                                                                   \
        }                                                                       \
        return;                                                                 \
    }                                                                           \
    U e = POSITION(U, 0);                                                       \
    if (e >= n) return;                                                         \
    uint c[6];                                                                  \
    S rest = S(p.offset); /* the offset without DIM's term */                   \
    U t = e;                                                                    \
    for (int d = RANK - 1; d >= 0; --d) {                                       \
        c[d] = uint(t % U(p.shape[d]));                                         \
        t /= U(p.shape[d]);                                                     \
        if (d != DIM) rest += S(c[d]) * S(p.strides[d]);                        \
    }                                                                           \
    uint v = GATHER ? LOAD_AUX(e) : LOAD_AUX(c[DIM]);                           \
    bool ok = v < p.dim_size;                                                   \
    if (!ok) REPORT_BAD(GATHER ? clamp_position(uint64_t(e)) : c[DIM]);         \
    S sel = S(v) * S(p.strides[DIM]);                                           \
    for (uint q = 0; q < ELEMS; ++q, ++e) {                                     \
        if (e >= n) return;                                                     \
        if (ok) STORE_DST(e, LOAD_SRC(rest + sel));                             \
        if (q + 1 == ELEMS || e + 1 >= n) return;                               \
        uint was = c[DIM];                                                      \
        c[RANK - 1] += 1;                                                       \
        if (RANK - 1 != DIM) rest += S(p.strides[RANK - 1]);                    \
        for (int d = RANK - 1; d > 0; --d) {                                    \
            if (c[d] < p.shape[d]) break;                                       \
            c[d] = 0;                                                           \
            if (d != DIM) rest -= S(p.strides[d]) * S(p.shape[d]);              \
            c[d - 1] += 1;                                                      \
            if (d - 1 != DIM) rest += S(p.strides[d - 1]);                      \
        }                                                                       \
        if (GATHER || c[DIM] != was) {                                          \
            v = GATHER ? LOAD_AUX(e + U(1)) : LOAD_AUX(c[DIM]);                 \
            ok = v < p.dim_size;                                                \
            if (!ok) REPORT_BAD(GATHER ? clamp_position(uint64_t(e + U(1))) : c[DIM]); \
            sel = S(v) * S(p.strides[DIM]);                                     \
        }                                                                       \
    }

// The walk along dim WALK (never the innermost): invocations come in tiles of LANES neighbours
// along the innermost dim, each tile's neighbouring invocations on the next chunks of WALK, so
// that the invocations running together read a few source rows (cached) and write whole
// output lines. Invocation g: lane = g % LANES, chunk = (g / LANES) % chunks, then the innermost
// block and the other dims, row-major; it moves positions chunk * walk_len ... (at most walk_len
// of them) along WALK with the other coordinates fixed.
const uint LANES = 16u;
#define SELECT_WALK(U, S)                                                       \
    uint len = p.walk_len;                                                      \
    uint chunks = (p.shape[WALK] + len - 1u) / len;                             \
    uint last = p.shape[RANK - 1];                                              \
    U count = U(LANES) * U(chunks) * U((last + LANES - 1u) / LANES);            \
    U inner = U(1); /* output positions between neighbours along WALK */       \
    for (int d = 0; d < RANK - 1; ++d) {                                        \
        if (d != WALK) count *= U(p.shape[d]);                                  \
        if (d > WALK) inner *= U(p.shape[d]);                                   \
    }                                                                           \
    inner *= U(last);                                                           \
    U g = U(p.base) + U(gl_GlobalInvocationID.x);                               \
    if (g >= count) return;                                                     \
    uint c[6];                                                                  \
    uint lane = uint(g % U(LANES));                                             \
    U t = g / U(LANES);                                                         \
    c[WALK] = uint(t % U(chunks)) * len;                                        \
    t /= U(chunks);                                                             \
    U blocks = U((last + LANES - 1u) / LANES);                                  \
    c[RANK - 1] = uint(t % blocks) * LANES + lane;                              \
    t /= blocks;                                                                \
    if (c[RANK - 1] >= last) return;                                            \
    for (int d = RANK - 2; d >= 0; --d) {                                       \
        if (d == WALK) continue;                                                \
        c[d] = uint(t % U(p.shape[d]));                                         \
        t /= U(p.shape[d]);                                                     \
    }                                                                           \
    U e = U(0);                                                                 \
    S off = S(p.offset);                                                        \
    for (int d = 0; d < RANK; ++d) {                                            \
        e = e * U(p.shape[d]) + U(c[d]);                                        \
        if (d != DIM) off += S(c[d]) * S(p.strides[d]);                         \
    }                                                                           \
    uint end = min(c[WALK] + len, p.shape[WALK]);                               \
    S step = WALK == DIM ? S(0) : S(p.strides[WALK]);                           \
    uint v = GATHER || WALK == DIM ? 0u : LOAD_AUX(c[DIM]);                     \
    for (uint i = c[WALK]; i < end; ++i, e += inner, off += step) {             \
        if (GATHER) v = LOAD_AUX(e); else if (WALK == DIM) v = LOAD_AUX(i);     \
        if (v < p.dim_size) {                                                   \
            STORE_DST(e, LOAD_SRC(off + S(v) * S(p.strides[DIM])));             \
        } else {                                                                \
            REPORT_BAD(GATHER ? clamp_position(uint64_t(e)) : (WALK == DIM ? i : c[DIM])); \
        }                                                                       \
    }

void select_wide() { SELECT(uint64_t, int64_t) }
void select_narrow() { SELECT(uint, int) }
void walk_wide() { SELECT_WALK(uint64_t, int64_t) }
void walk_narrow() { SELECT_WALK(uint, int) }

void main() {
    if (WALK >= 0) {
        if (WIDE) walk_wide(); else walk_narrow();
    } else {
        if (WIDE) select_wide(); else select_narrow();
    }
}
