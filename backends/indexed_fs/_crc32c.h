/* CRC-32C for the C extensions (_scan.c checks records with it, _commit.c writes them with
 * it): one definition, included by both.  crc_init() must run once, at module init. */
#ifndef CKPTBENCH_CRC32C_H
#define CKPTBENCH_CRC32C_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <nmmintrin.h>
#define HAVE_SSE42_PATH 1
#endif

/* ---------------------------------------------------------------------------------- CRC-32C
 * The Castagnoli CRC of the crc32c package (reflected poly 0x82F63B78, init and final xor ~0):
 * the SSE 4.2 instruction where the CPU has it, else slicing-by-8 tables. */
static uint32_t crc_table[8][256];
static int crc_hw;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (uint32_t i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#ifdef HAVE_SSE42_PATH
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d))
        crc_hw = (c & bit_SSE4_2) != 0;
#endif
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#ifdef HAVE_SSE42_PATH
__attribute__((target("sse4.2"))) static uint32_t crc_sse(uint32_t c, const uint8_t *p, size_t n) {
#if defined(__x86_64__)
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
#endif
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

static inline uint32_t crc32c(const uint8_t *p, size_t n) {
#ifdef HAVE_SSE42_PATH
    if (crc_hw)
        return ~crc_sse(~0u, p, n);
#endif
    return ~crc_sw(~0u, p, n);
}

/* crc32c_extend(crc, p, n): the CRC of what `crc` covered followed by p[0..n), as the crc32c
 * package's crc32c(data, crc) chains (0 starts a new one). */
static inline uint32_t crc32c_extend(uint32_t crc, const uint8_t *p, size_t n) {
#ifdef HAVE_SSE42_PATH
    if (crc_hw)
        return ~crc_sse(~crc, p, n);
#endif
    return ~crc_sw(~crc, p, n);
}

#endif
