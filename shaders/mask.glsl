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

// Where each element's mask byte lies (specialisation constant 5, MASK_MODE), so that a mask
// broadcast from a smaller array (stride 0 along some dims: a row mask (N, 1) over (N, C), a
// column mask (1, C), ...) is read in place, its small buffer alone on the device:
// - MASK_DENSE: the mask has the data's shape, row-major: element el's byte is mask[el];
// - MASK_PER_WORD: every 16-byte word's elements share one mask byte (the innermost broadcast
//   run holds whole words: a row mask over rows of whole words): one byte per word;
// - MASK_WORDS: the mask's innermost run is dense and holds whole words (a column mask over
//   rows of whole words): one MASKWORD per word, at the mask offset of its first element;
// - MASK_PER_ELEMENT: anything else: one byte per element.
// Off the dense mode the mask is described by the dense runs of its (merged) dims, innermost
// first: run r has extent mask_ext[r] and repeats every mask_div[r] elements of the output, so
// element el's byte lies at sum over r of ((el / mask_div[r]) % mask_ext[r]) * (the extents of
// the runs inside r). MASK_RUNS (constant 6, at most 4) runs are read; the rest are not there.
// Two divisions the host knows are not needed are folded away: MASK_INNER_DENSE (constant 7)
// says run 0 is the output's innermost dim (mask_div[0] is 1: a column mask), MASK_OUTER_DENSE
// (constant 8) that the last run is its outermost (no broadcast dim outside it: a row mask), whose
// modulo is then a clamp (which keeps the padding past the last element inside the mask).
const uint MASK_DENSE = 0u, MASK_PER_WORD = 1u, MASK_WORDS = 2u, MASK_PER_ELEMENT = 3u;
layout(constant_id = 5) const uint MASK_MODE = MASK_DENSE;
layout(constant_id = 6) const uint MASK_RUNS = 0u;
layout(constant_id = 7) const bool MASK_INNER_DENSE = false;
layout(constant_id = 8) const bool MASK_OUTER_DENSE = false;
const uint MAX_MASK_RUNS = 4u;
const uint ELEMENTS_PER_WORD = 16u / WIDTH;

// The mask offset of output element el (U: the position type; runs read from the push block).
#define MASK_OFFSET(U, el, divs, exts, result)                                  \
    {                                                                           \
        uint off_ = 0u, scale_ = 1u;                                            \
        for (uint r_ = 0u; r_ < MASK_RUNS; ++r_) {                              \
            U q_ = (MASK_INNER_DENSE && r_ == 0u) ? (el) : (el) / U(divs[r_]);  \
            uint digit_ = (MASK_OUTER_DENSE && r_ + 1u == MASK_RUNS)            \
                ? uint(min(q_, U(exts[r_] - 1u))) : uint(q_ % U(exts[r_]));     \
            off_ += digit_ * scale_;                                            \
            scale_ *= exts[r_];                                                 \
        }                                                                       \
        result = off_;                                                          \
    }

// All-ones over the bytes of element i of a 16-byte word wherever bit i of `bits` is set.
uvec4 selector_of_bits(uint bits) {
    uvec4 s = uvec4(0u);
    for (uint c = 0u; c < 4u; ++c) {
        uint w = 0u;
        for (uint b = 0u; b < 4u; ++b) {
            w |= ((bits >> ((4u * c + b) / uint(WIDTH))) & 1u) * (0xFFu << (8u * b));
        }
        s[c] = w;
    }
    return s;
}

// The selector of output word e: LOAD_MASK_WORD(i) reads MASKWORD i of the mask, LOAD_MASK_BYTE(i)
// its byte i; divs and exts are the push block's run arrays.
#define MASK_SELECTOR(U, e, divs, exts, sel)                                    \
    if (MASK_MODE == MASK_DENSE) {                                              \
        sel = selector(LOAD_MASK_WORD(e));                                      \
    } else if (MASK_MODE == MASK_PER_WORD) {                                    \
        uint at_;                                                               \
        MASK_OFFSET(U, (e) * U(ELEMENTS_PER_WORD), divs, exts, at_)            \
        sel = uvec4(uint(LOAD_MASK_BYTE(at_)) != 0u ? 0xFFFFFFFFu : 0u);         \
    } else if (MASK_MODE == MASK_WORDS) {                                       \
        uint at_;                                                               \
        MASK_OFFSET(U, (e) * U(ELEMENTS_PER_WORD), divs, exts, at_)            \
        sel = selector(LOAD_MASK_WORD(at_ / ELEMENTS_PER_WORD));                 \
    } else {                                                                    \
        uint bits_ = 0u;                                                        \
        for (uint i_ = 0u; i_ < ELEMENTS_PER_WORD; ++i_) {                      \
            uint at_;                                                           \
            MASK_OFFSET(U, (e) * U(ELEMENTS_PER_WORD) + U(i_), divs, exts, at_) \
            bits_ |= (uint(LOAD_MASK_BYTE(at_)) != 0u ? 1u : 0u) << i_;          \
        }                                                                       \
        sel = selector_of_bits(bits_);                                          \
    }
