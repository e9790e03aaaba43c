/* kg_sha256.h: SHA-256 (FIPS 180-4), what names and checks the program binaries a GPU network program caches.
   Written by kernelgen; plain C99, no dependencies beyond the C library. Streamed: kg_sha256_init, any number of
   kg_sha256_update, kg_sha256_final. */
#ifndef KG_SHA256_H
#define KG_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
  uint32_t state[8];
  uint64_t bytes;             /* hashed so far */
  unsigned char block[64];    /* a block's first (bytes % 64) bytes, waiting for the rest */
} kg_sha256;

/* the first 32 bits of the fractional parts of the cube roots of the first 64 primes */
static const uint32_t kg_sha256_k[64] = {
  0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
  0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
  0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
  0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
  0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
  0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
  0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
  0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

static inline uint32_t kg_sha256_rotr(uint32_t x, int n)
{
  return (x >> n) | (x << (32 - n));
}

static inline void kg_sha256_block(kg_sha256 *h, const unsigned char *p)
{
  uint32_t w[64];
  for (int t = 0; t < 16; ++t) {
    w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
  }
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = kg_sha256_rotr(w[t - 15], 7) ^ kg_sha256_rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = kg_sha256_rotr(w[t - 2], 17) ^ kg_sha256_rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h->state[0], b = h->state[1], c = h->state[2], d = h->state[3];
  uint32_t e = h->state[4], f = h->state[5], g = h->state[6], k = h->state[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t t1 = k + (kg_sha256_rotr(e, 6) ^ kg_sha256_rotr(e, 11) ^ kg_sha256_rotr(e, 25)) +
                        ((e & f) ^ (~e & g)) + kg_sha256_k[t] + w[t];
    const uint32_t t2 = (kg_sha256_rotr(a, 2) ^ kg_sha256_rotr(a, 13) ^ kg_sha256_rotr(a, 22)) +
                        ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h->state[0] += a;
  h->state[1] += b;
  h->state[2] += c;
  h->state[3] += d;
  h->state[4] += e;
  h->state[5] += f;
  h->state[6] += g;
  h->state[7] += k;
}

static inline void kg_sha256_init(kg_sha256 *h)
{
  /* the first 32 bits of the fractional parts of the square roots of the first 8 primes */
  static const uint32_t initial[8] = { 0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                       0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u };
  memcpy(h->state, initial, sizeof initial);
  h->bytes = 0;
}

static inline void kg_sha256_update(kg_sha256 *h, const void *data, size_t size)
{
  const unsigned char *p = (const unsigned char *)data;
  while (size > 0) {
    const size_t held = (size_t)(h->bytes % 64);
    const size_t take = size < 64 - held ? size : 64 - held;
    memcpy(h->block + held, p, take);
    h->bytes += take;
    p += take;
    size -= take;
    if (held + take == 64) {
      kg_sha256_block(h, h->block);
    }
  }
}

/* A part of a message made of several: its length first (8 bytes, little-endian), so that no two different
   sequences of parts hash alike. */
static inline void kg_sha256_part(kg_sha256 *h, const void *data, size_t size)
{
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) {
    length[i] = (unsigned char)((uint64_t)size >> (8 * i));
  }
  kg_sha256_update(h, length, sizeof length);
  kg_sha256_update(h, data, size);
}

static inline void kg_sha256_final(kg_sha256 *h, unsigned char digest[32])
{
  const uint64_t bits = h->bytes * 8;
  static const unsigned char pad[64] = { 0x80 };
  const size_t held = (size_t)(h->bytes % 64);
  kg_sha256_update(h, pad, held < 56 ? 56 - held : 120 - held);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) {
    length[i] = (unsigned char)(bits >> (56 - 8 * i)); /* big-endian */
  }
  kg_sha256_update(h, length, sizeof length);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) {
      digest[4 * i + j] = (unsigned char)(h->state[i] >> (24 - 8 * j));
    }
  }
}

#endif /* KG_SHA256_H */
