#version 450
// Copy-shader probe for benchmarks/copy_probe.py: one word type (WORD, WBYTES bytes) per build,
// storage buffers (-DSSBO) or device addresses, and the mapping / hoisting / arithmetic width
// chosen by specialisation constants. Not shipped: the kernels' own shaders live in shaders/.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ELEMS = 4;
layout(constant_id = 2) const bool WIDE = false;
layout(constant_id = 4) const bool COALESCED = false;
layout(constant_id = 5) const bool HOIST = false;

#ifdef PAIR
struct Pair { uvec4 a; uvec4 b; };  // 32 bytes per step
#endif

layout(push_constant) uniform Params { uint64_t src; uint64_t dst; uint64_t base; uint64_t n; } p;

#ifdef SSBO
layout(std430, set = 0, binding = 0) restrict readonly buffer SrcBuf { WORD w[]; } src_buf;
layout(std430, set = 0, binding = 1) restrict writeonly buffer DstBuf { WORD w[]; } dst_buf;
#define COPY1(i) dst_buf.w[uint(i)] = src_buf.w[uint(i)]
#else
layout(buffer_reference, std430, buffer_reference_align = WBYTES) buffer OneWord { WORD w; };
#define COPY1(i) OneWord(p.dst + uint64_t(i) * uint64_t(WBYTES)).w = OneWord(p.src + uint64_t(i) * uint64_t(WBYTES)).w
#endif

#define POSITION(U, q) (COALESCED                                                                  \
    ? U(p.base) + U(gl_WorkGroupID.x) * U(gl_WorkGroupSize.x * ELEMS) + U(q) * U(gl_WorkGroupSize.x) \
      + U(gl_LocalInvocationID.x)                                                                  \
    : U(p.base) + U(gl_GlobalInvocationID.x) * U(ELEMS) + U(q))

#define COPY(U)                                                                 \
    U n = U(p.n);                                                               \
    if (HOIST && POSITION(U, ELEMS - 1u) < n) {                                 \
        for (uint q = 0; q < ELEMS; ++q) COPY1(POSITION(U, q));                 \
        return;                                                                 \
    }                                                                           \
    for (uint q = 0; q < ELEMS; ++q) {                                          \
        U e = POSITION(U, q);                                                   \
        if (e >= n) return;                                                     \
        COPY1(e);                                                               \
    }

void copy_wide() { COPY(uint64_t) }
void copy_narrow() { COPY(uint) }
void main() { if (WIDE) copy_wide(); else copy_narrow(); }
