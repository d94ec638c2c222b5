// Shared declarations for lazyfuel's data-mover shaders.
//
// Every shader moves bits and never does arithmetic on element values: elements are carried as
// unsigned words of the element's width (WIDTH bytes: 1, 2, 4, 8 or 16), so NaN payloads, -0.0,
// subnormals and bf16 survive unchanged. Every device allocation lazyfuel makes is 16-byte
// aligned and rounded up to 16 bytes; kernels still write only the elements they own.
//
// Two ways to reach memory, chosen by the build (-DSSBO) and, per step, by the host:
// - storage buffers (set 0: 0 source, 1 output, 2 indices or mask, 3 status) bound with push
//   descriptors; positions are array indices. Much faster on lavapipe; every bound range must fit
//   in maxStorageBufferRange.
// - buffer device addresses in push constants (p.src, p.dst, p.aux, p.status); positions are
//   64-bit and no range limit applies. Used where a buffer is larger than maxStorageBufferRange.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require

#ifndef WIDTH
#error "WIDTH (element bytes) must be defined by the build"
#endif

#if WIDTH == 1
#define WORD uint8_t
#define FILL_WORD(f) uint8_t((f).x)
#elif WIDTH == 2
#define WORD uint16_t
#define FILL_WORD(f) uint16_t((f).x)
#elif WIDTH == 4
#define WORD uint
#define FILL_WORD(f) ((f).x)
#elif WIDTH == 8
#define WORD uvec2
#define FILL_WORD(f) ((f).xy)
#elif WIDTH == 16
#define WORD uvec4
#define FILL_WORD(f) (f)
#else
#error "WIDTH must be 1, 2, 4, 8 or 16"
#endif
#if WIDTH == 16 && !defined(SSBO)
// Through device addresses lavapipe moves memory one 32- or 64-bit component per lane at a time:
// 16-byte words as two 64-bit halves move 1.6x faster than as four 32-bit ones (with storage
// buffers it is the other way round). Shaders only move WORDs, so the split is invisible.
#undef WORD
#define WORD u64vec2
#endif

layout(local_size_x_id = 0) in;
// Elements (or words) each invocation moves; the host measures and picks it per device.
layout(constant_id = 1) const uint ELEMS = 4;
// True when some position may not fit in 32 bits (31 for signed offsets): index arithmetic then
// runs in 64 bits, which costs several times more on lavapipe.
layout(constant_id = 2) const bool WIDE = false;

// How invocations share the work: false = each takes ELEMS consecutive positions (cheap carries
// from one to the next; best on CPUs such as lavapipe); true = position q of an invocation is
// q * workgroup size + its local index, so neighbouring invocations touch neighbouring memory
// (coalesced; best on GPUs). The host picks it per device kind.
layout(constant_id = 4) const bool COALESCED = false;

const uint NO_BAD = 0xFFFFFFFFu;

// The position an invocation handles in its q-th step (either mapping), given the dispatch base.
#define POSITION(U, q) (COALESCED                                                                  \
    ? U(p.base) + U(gl_WorkGroupID.x) * U(gl_WorkGroupSize.x * ELEMS) + U(q) * U(gl_WorkGroupSize.x) \
      + U(gl_LocalInvocationID.x)                                                                  \
    : U(p.base) + U(gl_GlobalInvocationID.x) * U(ELEMS) + U(q))

#ifdef OWN_BUFFERS
// the shader declares its own buffers
#elif defined(SSBO)
layout(std430, set = 0, binding = 0) readonly buffer SrcBuf { WORD w[]; } src_buf;
layout(std430, set = 0, binding = 1) writeonly buffer DstBuf { WORD w[]; } dst_buf;
#if defined(AUX_U32)
layout(std430, set = 0, binding = 2) readonly buffer AuxBuf { uint v[]; } aux_buf;
#elif defined(AUX_U8)
layout(std430, set = 0, binding = 2) readonly buffer AuxBuf { uint8_t v[]; } aux_buf;
#endif
// The step's status slot: the first bad index position seen (0xFFFFFFFF = none).
layout(std430, set = 0, binding = 3) buffer StatusBuf { uint first_bad; } status_buf;
#define LOAD_SRC(i) src_buf.w[uint(i)]
#define STORE_DST(i, value) dst_buf.w[uint(i)] = (value)
#define LOAD_AUX(i) aux_buf.v[uint(i)]
#define REPORT_BAD(pos) atomicMin(status_buf.first_bad, (pos))
#else
layout(buffer_reference, std430, buffer_reference_align = WIDTH) buffer OneWord { WORD w; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OneU32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer OneByte { uint8_t v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Status { uint first_bad; };
#define LOAD_SRC(i) OneWord(p.src + uint64_t(i) * uint64_t(WIDTH)).w
#define STORE_DST(i, value) OneWord(p.dst + uint64_t(i) * uint64_t(WIDTH)).w = (value)
#if defined(AUX_U32)
#define LOAD_AUX(i) OneU32(p.aux + uint64_t(i) * 4ul).v
#elif defined(AUX_U8)
#define LOAD_AUX(i) OneByte(p.aux + uint64_t(i)).v
#endif
#define REPORT_BAD(pos) atomicMin(Status(p.status).first_bad, (pos))
#endif

// Positions are reported in 32 bits; larger ones saturate and the host finds the exact one.
uint clamp_position(uint64_t pos) { return pos >= uint64_t(NO_BAD) ? NO_BAD - 1u : uint(pos); }
