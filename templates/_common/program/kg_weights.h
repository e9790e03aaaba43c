/* kg_weights.h: a kernelgen weights file (<network>.weights), loaded and checked. Written by kernelgen; plain C99,
   no dependencies beyond the C library. The file (little-endian):

     offset  0  magic "KGWEIGHT"
             8  u32 format version, 1
            12  u32 byte-order mark 0x01020304
            16  32-byte SHA-256 digest of the build (manifest, configs, packed weights)
            48  u64 offset and u64 bytes of the table of contents (JSON, for people and tools)
            64  u64 offset and u64 bytes of the data section (offset a multiple of KG_WEIGHTS_ALIGNMENT); the file ends with it

   network.h names the digest its build wrote (<NET>_WEIGHTS_DIGEST, hex) and each tensor's offset in the data
   section; a file from another build is refused, naming both digests. */
#ifndef KG_WEIGHTS_H
#define KG_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KG_WEIGHTS_FORMAT 1
#define KG_WEIGHTS_HEADER_BYTES 80
#define KG_WEIGHTS_DIGEST_BYTES 32
#define KG_WEIGHTS_ALIGNMENT {{ weights_alignment }} /* network/weights.py ALIGNMENT */

static inline uint64_t kg_weights_u64(const unsigned char *p, int bytes)
{
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    value = (value << 8) | p[i]; /* little-endian, whatever this machine's byte order */
  }
  return value;
}

/* Checks a whole weights file (`file`, `size` bytes) against the build this program was compiled from: the
   digest `expected_hex` (64 hex digits) and a data section of `expected_bytes`. Returns the data section, or NULL
   with the reason in `message`. The data section is KG_WEIGHTS_ALIGNMENT-byte aligned when `file` is (kg_weights_load). */
static inline const unsigned char *kg_weights_check(const unsigned char *file, size_t size, const char *expected_hex,
                                                    size_t expected_bytes, char *message, size_t message_size)
{
  if (size < KG_WEIGHTS_HEADER_BYTES || memcmp(file, "KGWEIGHT", 8) != 0) {
    snprintf(message, message_size, "not a kernelgen weights file (it does not start with KGWEIGHT)");
    return NULL;
  }
  const uint64_t mark = kg_weights_u64(file + 12, 4);
  if (mark != 0x01020304u) {
    snprintf(message, message_size, "byte-order mark 0x%08lx, expected 0x01020304 (little-endian)",
             (unsigned long)mark);
    return NULL;
  }
  const uint64_t format = kg_weights_u64(file + 8, 4);
  if (format != KG_WEIGHTS_FORMAT) {
    snprintf(message, message_size, "weights format %lu; this program reads format %d", (unsigned long)format,
             KG_WEIGHTS_FORMAT);
    return NULL;
  }
  char found_hex[2 * KG_WEIGHTS_DIGEST_BYTES + 1];
  for (int i = 0; i < KG_WEIGHTS_DIGEST_BYTES; ++i) {
    snprintf(found_hex + 2 * i, 3, "%02x", file[16 + i]);
  }
  if (strcmp(found_hex, expected_hex) != 0) {
    snprintf(message, message_size, "the file is another build's weights: its digest is %s, this program was "
             "built for %s (rebuild both with the same `kernelgen build`)", found_hex, expected_hex);
    return NULL;
  }
  const uint64_t offset = kg_weights_u64(file + 64, 8);
  const uint64_t bytes = kg_weights_u64(file + 72, 8);
  if (offset % KG_WEIGHTS_ALIGNMENT != 0 || offset > size || size - offset != bytes || bytes != expected_bytes) {
    snprintf(message, message_size, "a damaged file: %lu bytes, a data section of %lu bytes at %lu, expected %lu "
             "bytes", (unsigned long)size, (unsigned long)bytes, (unsigned long)offset, (unsigned long)expected_bytes);
    return NULL;
  }
  return file + offset;
}

/* Frees what kg_weights_load returned. */
static inline void kg_weights_free(unsigned char *file)
{
  if (file != NULL) {
    free(((void **)file)[-1]);
  }
}

/* Reads the file at `path` into a new KG_WEIGHTS_ALIGNMENT-byte aligned buffer (free it with kg_weights_free); NULL with the reason
   in `message` when it cannot. */
static inline unsigned char *kg_weights_load(const char *path, size_t *size, char *message, size_t message_size)
{
  FILE *in = fopen(path, "rb");
  if (in == NULL) {
    snprintf(message, message_size, "cannot open it");
    return NULL;
  }
  long length = -1;
  if (fseek(in, 0, SEEK_END) == 0) {
    length = ftell(in);
  }
  if (length < 0 || fseek(in, 0, SEEK_SET) != 0) {
    snprintf(message, message_size, "cannot find its size");
    fclose(in);
    return NULL;
  }
  /* the buffer keeps malloc's own pointer just before the aligned start, for kg_weights_free */
  void *raw = malloc((size_t)length + KG_WEIGHTS_ALIGNMENT + sizeof(void *));
  if (raw == NULL) {
    snprintf(message, message_size, "out of memory for %ld bytes", length);
    fclose(in);
    return NULL;
  }
  const uintptr_t start = ((uintptr_t)raw + sizeof(void *) + KG_WEIGHTS_ALIGNMENT - 1) &
                          ~(uintptr_t)(KG_WEIGHTS_ALIGNMENT - 1);
  unsigned char *file = (unsigned char *)start;
  ((void **)file)[-1] = raw;
  const size_t got = fread(file, 1, (size_t)length, in);
  fclose(in);
  if (got != (size_t)length) {
    snprintf(message, message_size, "read %lu of its %ld bytes", (unsigned long)got, length);
    kg_weights_free(file);
    return NULL;
  }
  *size = (size_t)length;
  return file;
}

#endif /* KG_WEIGHTS_H */
