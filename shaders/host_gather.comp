#version 450
// Rows of a host table read where they lie (issue 18 item 4): the table's pages are imported as
// device-addressable memory in segments of 2**shift bytes (VK_EXT_external_memory_host; each
// segment under maxMemoryAllocationSize), `segments` holds each segment's device address, and
// output word e = j * R + r takes word r of row ids[j]: byte offset
// start + (ids[j] * R + r) * WIDTH of the table, in segment offset >> shift at offset & mask.
// On a discrete GPU the loads cross the link straight into the result's device memory. Words
// never straddle a segment (segments are a multiple of 16 bytes, rows and `start` of WIDTH).
// The host has range-checked every id, so nothing is checked here. Device addresses only.
#define OWN_BUFFERS
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = WIDTH) buffer OneWord { WORD w; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer OneU64 { uint64_t v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OneU32 { uint v; };

layout(push_constant) uniform Params {
    uint64_t segments;  // the segments' device addresses, one uint64 each
    uint64_t dst;
    uint64_t ids;       // uint32 row ids, one per output row
    uint64_t base;      // first output word of this dispatch
    uint64_t n;         // output words in total
    uint64_t start;     // byte offset of the table's row 0 from segment 0's first byte
    uint R;             // words per row
    uint shift;         // log2 of a segment's bytes
} p;

// Each invocation first loads its ELEMS words (each from a random place in host memory: over a
// PCIe link a load waits microseconds), then stores them: the loads are all in flight at once
// rather than each behind the store before it (the compiler may not move a load above a store
// through another pointer).
void main() {
    uint64_t mask = (uint64_t(1) << p.shift) - uint64_t(1);
    WORD words[ELEMS];
    uint count = 0;
    for (uint q = 0; q < ELEMS; ++q) {
        uint64_t e = POSITION(uint64_t, q);
        if (e >= p.n) break;
        uint64_t j;
        uint r;
        if (WIDE) {  // a specialisation constant: only one side is compiled in
            j = e / uint64_t(p.R);
            r = uint(e - j * uint64_t(p.R));
        } else {
            uint e32 = uint(e);
            j = uint64_t(e32 / p.R);
            r = e32 % p.R;
        }
        uint64_t id = uint64_t(OneU32(p.ids + j * uint64_t(4)).v);
        uint64_t off = p.start + (id * uint64_t(p.R) + uint64_t(r)) * uint64_t(WIDTH);
        uint64_t at = OneU64(p.segments + (off >> p.shift) * uint64_t(8)).v + (off & mask);
        words[q] = OneWord(at).w;
        count = q + 1;
    }
    for (uint q = 0; q < count; ++q) {
        OneWord(p.dst + POSITION(uint64_t, q) * uint64_t(WIDTH)).w = words[q];
    }
}
