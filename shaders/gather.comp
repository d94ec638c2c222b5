#version 450
// Gather along one dim. Source [outer, S, inner], indices and output [outer, M, inner]:
// out[o, m, k] = src[o, idx[o, m, k], k]. An index >= S reads nothing, writes nothing and
// records its flat position in `status`.
#define AUX_U32
#include "common.glsl"

layout(push_constant) uniform Params {
    uint64_t src;
    uint64_t dst;
    uint64_t aux;     // indices
    uint64_t status;
    uint64_t base;    // first output element of this dispatch
    uint64_t n;       // output elements in total
    uint inner;
    uint M;           // output (and index) extent along dim
    uint S;           // source extent along dim
} p;

// Quads (GPUs: COALESCED and QUADS, ELEMS a multiple of 4): each invocation moves ELEMS / 4 quads
// of 4 consecutive outputs, neighbouring invocations on neighbouring quads. A quad's 4 indices
// arrive in one 16-byte load and its 4 outputs leave in one store of 4 * WIDTH bytes (two or four
// 16-byte stores for 8- and 16-byte elements), and the split of a position into (o, m, k) is paid
// once per quad instead of once per element. A quad with a bad index or past the end is written
// element by element (bad ones not at all). Index buffers are bound 16-byte rounded, so the last
// quad's load stays inside them; the values past the end are ignored.
layout(constant_id = 5) const bool QUADS = true;

#if WIDTH == 1
#define QUAD uint
#define QUAD_BYTES 4
#define PACK(x) (uint(x[0]) | uint(x[1]) << 8 | uint(x[2]) << 16 | uint(x[3]) << 24)
#elif WIDTH == 2
#define QUAD uvec2
#define QUAD_BYTES 8
#define PACK(x) uvec2(uint(x[0]) | uint(x[1]) << 16, uint(x[2]) | uint(x[3]) << 16)
#elif WIDTH == 4
#define QUAD uvec4
#define QUAD_BYTES 16
#define PACK(x) uvec4(x[0], x[1], x[2], x[3])
#else
#define QUAD uvec4
#define QUAD_BYTES 16
#endif

#ifdef SSBO
layout(std430, set = 0, binding = 1) writeonly buffer DstQuads { QUAD w[]; } dst_quads;
layout(std430, set = 0, binding = 2) readonly buffer AuxQuads { uvec4 v[]; } aux_quads;
#define LOAD_AUX4(qi) aux_quads.v[uint(qi)]
#define STORE_QUAD_AT(i, value) dst_quads.w[uint(i)] = (value)
#else
layout(buffer_reference, std430, buffer_reference_align = 16) buffer FourU32 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = QUAD_BYTES) buffer OneQuad { QUAD w; };
#define LOAD_AUX4(qi) FourU32(p.aux + uint64_t(qi) * 16ul).v
#define STORE_QUAD_AT(i, value) OneQuad(p.dst + uint64_t(i) * uint64_t(QUAD_BYTES)).w = (value)
#endif

// Store the 4 words x[0..3] of the quad starting at output element e (a multiple of 4).
#if WIDTH <= 4
#define STORE_QUAD(U, e, x) STORE_QUAD_AT((e) / U(4), PACK(x))
#elif WIDTH == 8
#define STORE_QUAD(U, e, x)                                                     \
    STORE_QUAD_AT((e) / U(2), uvec4(x[0], x[1]));                               \
    STORE_QUAD_AT((e) / U(2) + U(1), uvec4(x[2], x[3]))
#else
#define STORE_QUAD(U, e, x)                                                     \
    for (uint i = 0; i < 4; ++i) STORE_DST((e) + U(i), x[i])
#endif

// U: the position type, 32-bit unless WIDE (source and output elements < 2**32).
#define GATHER_QUADS(U)                                                         \
    U n = U(p.n);                                                               \
    for (uint q = 0; q < ELEMS / 4u; ++q) {                                     \
        U e = U(p.base) + U(gl_WorkGroupID.x) * U(gl_WorkGroupSize.x * ELEMS)   \
            + U(4u * (q * gl_WorkGroupSize.x + gl_LocalInvocationID.x));        \
        if (e >= n) return;                                                     \
        uvec4 v = LOAD_AUX4(e / U(4));                                          \
        U t = e / U(p.inner);                                                   \
        uint k = uint(e - t * U(p.inner));                                      \
        U o = t / U(p.M);                                                       \
        uint m = uint(t - o * U(p.M));                                          \
        WORD x[4];                                                              \
        uint skip = 0u; /* bit i: element i is not written */                   \
        for (uint i = 0; i < 4; ++i) {                                          \
            x[i] = WORD(0);                                                     \
            if (e + U(i) >= n) {                                                \
                skip |= 1u << i;                                                \
            } else if (v[i] < p.S) {                                            \
                x[i] = LOAD_SRC((o * U(p.S) + U(v[i])) * U(p.inner) + U(k));    \
            } else {                                                            \
                REPORT_BAD(clamp_position(uint64_t(e + U(i))));                 \
                skip |= 1u << i;                                                \
            }                                                                   \
            if (++k == p.inner) {                                               \
                k = 0;                                                          \
                if (++m == p.M) { m = 0; ++o; }                                 \
            }                                                                   \
        }                                                                       \
        if (skip == 0u) {                                                       \
            STORE_QUAD(U, e, x);                                                \
        } else {                                                                \
            for (uint i = 0; i < 4; ++i) {                                      \
                if ((skip >> i & 1u) == 0u) STORE_DST(e + U(i), x[i]);          \
            }                                                                   \
        }                                                                       \
    }

#define GATHER(U)                                                               \
    U n = U(p.n);                                                               \
    if (COALESCED) {                                                            \
        for (uint q = 0; q < ELEMS; ++q) {                                      \
            U e = POSITION(U, q);                                               \
            if (e >= n) return;                                                 \
            uint v = LOAD_AUX(e);                                               \
            if (v < p.S) {                                                      \
                U t = e / U(p.inner);                                           \
                U o = t / U(p.M);                                               \
                STORE_DST(e, LOAD_SRC((o * U(p.S) + U(v)) * U(p.inner) + e % U(p.inner))); \
            } else {                                                            \
                REPORT_BAD(clamp_position(uint64_t(e)));                        \
            }                                                                   \
        }                                                                       \
        return;                                                                 \
    }                                                                           \
    /* The first bad position is kept in a register and reported once: CPU devices run  \
       every branch under a lane mask, so an atomic in the loop would cost every step. */ \
    U e = POSITION(U, 0);                                                       \
    if (e >= n) return;                                                         \
    U t = e / U(p.inner);                                                       \
    uint k = uint(e % U(p.inner));                                              \
    uint m = uint(t % U(p.M));                                                  \
    U o = t / U(p.M);                                                           \
    uint bad = NO_BAD;                                                          \
    for (uint q = 0; q < ELEMS; ++q, ++e) {                                     \
        if (e >= n) break;                                                      \
        uint v = LOAD_AUX(e);                                                   \
        if (v < p.S) {                                                          \
            STORE_DST(e, LOAD_SRC((o * U(p.S) + U(v)) * U(p.inner) + U(k)));    \
        } else {                                                                \
            bad = min(bad, clamp_position(uint64_t(e)));                        \
        }                                                                       \
        if (++k == p.inner) {                                                   \
            k = 0;                                                              \
            if (++m == p.M) { m = 0; ++o; }                                     \
        }                                                                       \
    }                                                                           \
    if (bad != NO_BAD) REPORT_BAD(bad);

void gather_wide() { GATHER(uint64_t) }
void gather_narrow() { GATHER(uint) }
void gather_quads_wide() { GATHER_QUADS(uint64_t) }
void gather_quads_narrow() { GATHER_QUADS(uint) }

void main() {
    bool quads = COALESCED && QUADS && ELEMS % 4u == 0u;
    if (WIDE) {
        if (quads) gather_quads_wide(); else gather_wide();
    } else {
        if (quads) gather_quads_narrow(); else gather_narrow();
    }
}
