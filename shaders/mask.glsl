// The mask side of masked_fill, shared by masked_fill.comp and select_fill.comp: the mask bytes of
// one 16-byte data word (16 / WIDTH elements, WIDTH = element bytes) read as one MASKWORD, and the
// bitwise selector that takes the fill's bits where an element's mask byte is set.
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
