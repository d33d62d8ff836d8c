/* The CRC-32 every journal record and snapshot chunk carries: IEEE 802.3, reflected
 * (polynomial 0xEDB88320, initial and final value 0xFFFFFFFF; "123456789" -> 0xCBF43926), the
 * one files have always been written with.
 *
 * Two implementations of that one checksum:
 *   - slicing by 8 (tables built once): anywhere, and for what is left after the fast path;
 *   - on x86-64 with PCLMULQDQ (checked at run time): four 128-bit lanes folded with
 *     carry-less multiplies, 64 bytes per step, then folded to 128 bits and Barrett-reduced,
 *     after Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
 *     Instruction" (the constants are x^k mod P for that paper's k, bit-reflected). About
 *     5x the tables' speed: the load of a 230 MB snapshot checksums every byte.
 * tests/store (crc32_vectors) holds both to known values and to each other. */
#include "store/fs/fs_map.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FS_CRC_CLMUL 1
#include <immintrin.h>
#endif

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_clmul; /* set once, under crc_once */

static void crc_init(void)
{
	uint32_t i, k, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^
					  crc_table[0][crc_table[k - 1][i] & 0xFF];
#ifdef FS_CRC_CLMUL
	__builtin_cpu_init();
	crc_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Advances the running (pre-inverted) state c over len bytes, by the tables. */
static uint32_t crc_tables(uint32_t c, const unsigned char *p, size_t len)
{
	uint32_t hi;

	for (; len >= 8; len -= 8, p += 8) {
		c ^= le32(p);
		hi = le32(p + 4);
		c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^
		    crc_table[5][(c >> 16) & 0xFF] ^ crc_table[4][c >> 24] ^
		    crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
		    crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
	}
	while (len--)
		c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
	return c;
}

#ifdef FS_CRC_CLMUL
/* The running state c over len bytes: len >= 64, a multiple of 16. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul_run(uint32_t c,
									 const unsigned char *p,
									 size_t len)
{
	/* k1, k2: x^(4*128+32), x^(4*128-32) mod P (the 64-byte stride); k3, k4: the same for
	 * 128 bits; k5: x^64 mod P; then P' and mu for the Barrett reduction. */
	const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
	const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124);
	const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
	const __m128i mask32 = _mm_setr_epi32(-1, 0, -1, 0);
	__m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;

	x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 0x00));
	x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 0x10));
	x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 0x20));
	x4 = _mm_loadu_si128((const __m128i *)(const void *)(p + 0x30));
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
	p += 64;
	len -= 64;
	/* Four lanes, 64 bytes per step. */
	for (; len >= 64; len -= 64, p += 64) {
		x5 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
		x6 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
		x7 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
		x8 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
		x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
		x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
		x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, x5),
				   _mm_loadu_si128((const __m128i *)(const void *)(p + 0x00)));
		x2 = _mm_xor_si128(_mm_xor_si128(x2, x6),
				   _mm_loadu_si128((const __m128i *)(const void *)(p + 0x10)));
		x3 = _mm_xor_si128(_mm_xor_si128(x3, x7),
				   _mm_loadu_si128((const __m128i *)(const void *)(p + 0x20)));
		x4 = _mm_xor_si128(_mm_xor_si128(x4, x8),
				   _mm_loadu_si128((const __m128i *)(const void *)(p + 0x30)));
	}
	/* The four lanes into one. */
	x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
	x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
	x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
	/* 16 bytes per step for the rest. */
	for (; len >= 16; len -= 16, p += 16) {
		x2 = _mm_loadu_si128((const __m128i *)(const void *)p);
		x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
	}
	/* 128 bits to 64. */
	x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
	x2 = _mm_srli_si128(x1, 4);
	x1 = _mm_and_si128(x1, mask32);
	x1 = _mm_clmulepi64_si128(x1, k5k0, 0x00);
	x1 = _mm_xor_si128(x1, x2);
	/* Barrett reduction to 32 bits. */
	x0 = _mm_and_si128(x1, mask32);
	x0 = _mm_clmulepi64_si128(x0, poly, 0x10);
	x0 = _mm_and_si128(x0, mask32);
	x0 = _mm_clmulepi64_si128(x0, poly, 0x00);
	x1 = _mm_xor_si128(x1, x0);
	return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

uint32_t fs_crc32_tables(const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return crc_tables(0xFFFFFFFFu, buf, len) ^ 0xFFFFFFFFu;
}

uint32_t fs_crc32(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t c = 0xFFFFFFFFu;

	pthread_once(&crc_once, crc_init);
#ifdef FS_CRC_CLMUL
	if (crc_clmul && len >= 64) {
		size_t n = len & ~(size_t)15;

		c = crc_clmul_run(c, p, n);
		p += n;
		len -= n;
	}
#endif
	return crc_tables(c, p, len) ^ 0xFFFFFFFFu;
}
