// Shared declarations for lazyfuel's data-mover shaders.
//
// Every shader moves bits and never does arithmetic on element values: elements are carried as
// unsigned words of the element's width (WIDTH bytes: 1, 2, 4, 8 or 16), so NaN payloads, -0.0,
// subnormals and bf16 survive unchanged. Buffers are reached through buffer device addresses
// passed in push constants, so no storage-buffer range limit applies and no descriptors are bound.
// Every device allocation lazyfuel makes is 16-byte aligned and rounded up to 16 bytes.
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

// Positions are 64-bit (GLSL arrays take 32-bit indices only), so elements are reached by address.
layout(buffer_reference, std430, buffer_reference_align = WIDTH) buffer OneWord { WORD w; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OneU32 { uint v; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer OneByte { uint8_t b; };
// One slot per program step: the first bad index position seen (0xFFFFFFFF = none).
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Status { uint first_bad; };

layout(local_size_x_id = 0) in;
// Elements (or words) each invocation moves; the host measures and picks it per device.
layout(constant_id = 1) const uint ELEMS = 4;
// True when some flat position may exceed 2**32 - 1: index arithmetic then runs in 64 bits.
layout(constant_id = 2) const bool WIDE = false;

const uint NO_BAD = 0xFFFFFFFFu;

// Positions are reported in 32 bits; larger ones saturate and the host finds the exact one.
uint clamp_position(uint64_t pos) { return pos >= uint64_t(NO_BAD) ? NO_BAD - 1u : uint(pos); }

WORD load_word(uint64_t base, uint64_t i) { return OneWord(base + i * uint64_t(WIDTH)).w; }
void store_word(uint64_t base, uint64_t i, WORD v) { OneWord(base + i * uint64_t(WIDTH)).w = v; }
uint load_u32(uint64_t base, uint64_t i) { return OneU32(base + i * 4ul).v; }
uint8_t load_byte(uint64_t base, uint64_t i) { return OneByte(base + i).b; }

// First flat position this invocation handles.
uint64_t first_position(uint64_t base) {
    return base + uint64_t(gl_GlobalInvocationID.x) * uint64_t(ELEMS);
}
