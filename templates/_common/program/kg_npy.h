/* kg_npy.h: one array in a .npy file (NumPy's format, version 1.0), read and written. Written by kernelgen; plain
   C99, no dependencies beyond the C library.

   A .npy file is the magic "\x93NUMPY", the version (two bytes: 1, 0), the header's length (u16, little-endian)
   and the header: a Python dict such as {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), },
   padded with spaces and a newline; then the elements. This reads only what numpy.save writes for a
   little-endian C-order float32 ('<f4') or uint8 ('|u1') array, and says what else it found. */
#ifndef KG_NPY_H
#define KG_NPY_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KG_NPY_MAX_RANK 8

/* "(1, 3, 224, 224)", as numpy prints a shape. */
static inline void kg_npy_shape_text(int rank, const size_t *shape, char *text, size_t text_size)
{
  size_t used = (size_t)snprintf(text, text_size, "(");
  for (int i = 0; i < rank && used < text_size; ++i) {
    used += (size_t)snprintf(text + used, text_size - used, i ? ", %lu" : "%lu", (unsigned long)shape[i]);
  }
  if (used < text_size) {
    snprintf(text + used, text_size - used, rank == 1 ? ",)" : ")");
  }
}

static inline int kg_npy_little_endian(void)
{
  const unsigned int one = 1;
  return *(const unsigned char *)&one == 1;
}

/* The text after `key` in a header, past spaces; NULL when the header has no such key. */
static inline const char *kg_npy_value(const char *header, const char *key)
{
  const char *at = strstr(header, key);
  if (at == NULL) {
    return NULL;
  }
  at += strlen(key);
  while (*at == ' ') {
    ++at;
  }
  return at;
}

/* Checks a header against the array the caller expects; 0, or -1 with the reason in `message`. */
static inline int kg_npy_check_header(const char *header, const char *descr, int rank, const size_t *shape,
                                      char *message, size_t message_size)
{
  const char *value = kg_npy_value(header, "'descr':");
  if (value == NULL || *value != '\'') {
    snprintf(message, message_size, "its header names no dtype: %s", header);
    return -1;
  }
  const char *end = strchr(value + 1, '\'');
  const size_t length = end ? (size_t)(end - value - 1) : 0;
  if (length != strlen(descr) || strncmp(value + 1, descr, length) != 0) {
    snprintf(message, message_size, "dtype '%.*s', expected '%s'%s", (int)length, value + 1, descr,
             value[1] == '>' ? " (a big-endian array: save it as little-endian, e.g. a.astype('<f4'))" : "");
    return -1;
  }
  value = kg_npy_value(header, "'fortran_order':");
  if (value == NULL || strncmp(value, "False", 5) != 0) {
    snprintf(message, message_size, "a Fortran-order array, expected C order (numpy.ascontiguousarray)");
    return -1;
  }
  value = kg_npy_value(header, "'shape':");
  if (value == NULL || *value != '(') {
    snprintf(message, message_size, "its header names no shape: %s", header);
    return -1;
  }
  size_t found[KG_NPY_MAX_RANK];
  int found_rank = 0;
  const char *p = value + 1;
  while (*p != ')' && *p != '\0') {
    char *after;
    const unsigned long extent = strtoul(p, &after, 10);
    if (after == p || found_rank == KG_NPY_MAX_RANK) {
      snprintf(message, message_size, "a shape this reader does not take: %s", value);
      return -1;
    }
    found[found_rank++] = (size_t)extent;
    p = after;
    while (*p == ',' || *p == ' ') {
      ++p;
    }
  }
  int same = found_rank == rank;
  for (int i = 0; same && i < rank; ++i) {
    same = found[i] == shape[i];
  }
  if (!same) {
    char got[128], want[128];
    kg_npy_shape_text(found_rank, found, got, sizeof got);
    kg_npy_shape_text(rank, shape, want, sizeof want);
    snprintf(message, message_size, "shape %s, expected %s", got, want);
    return -1;
  }
  return 0;
}

/* Reads the array in `path` into `data` (`bytes`): it must be `descr` ("<f4": float32, "|u1": uint8), C order, of
   shape shape[0 .. rank - 1]. Returns 0, or -1 with the reason in `message`. */
static inline int kg_npy_read(const char *path, const char *descr, int rank, const size_t *shape, void *data,
                              size_t bytes, char *message, size_t message_size)
{
  if (!kg_npy_little_endian()) {
    snprintf(message, message_size, "this program reads little-endian .npy files on little-endian machines only");
    return -1;
  }
  FILE *in = fopen(path, "rb");
  if (in == NULL) {
    snprintf(message, message_size, "cannot open it");
    return -1;
  }
  unsigned char lead[10];
  if (fread(lead, 1, sizeof lead, in) != sizeof lead || memcmp(lead, "\x93NUMPY", 6) != 0) {
    snprintf(message, message_size, "not a .npy file (it does not start with \\x93NUMPY)");
    fclose(in);
    return -1;
  }
  if (lead[6] != 1 || lead[7] != 0) {
    snprintf(message, message_size, ".npy version %d.%d, expected 1.0 (what numpy.save writes for a header under "
             "64 KiB)", lead[6], lead[7]);
    fclose(in);
    return -1;
  }
  const size_t length = (size_t)lead[8] | (size_t)lead[9] << 8;
  char *header = (char *)malloc(length + 1);
  if (header == NULL || fread(header, 1, length, in) != length) {
    snprintf(message, message_size, "its header is cut short");
    free(header);
    fclose(in);
    return -1;
  }
  header[length] = '\0';
  const int checked = kg_npy_check_header(header, descr, rank, shape, message, message_size);
  free(header);
  if (checked != 0) {
    fclose(in);
    return -1;
  }
  const size_t got = fread(data, 1, bytes, in);
  const int more = fgetc(in) != EOF;
  fclose(in);
  if (got != bytes || more) {
    snprintf(message, message_size, "%s data than its shape (%lu bytes expected)", more ? "more" : "less",
             (unsigned long)bytes);
    return -1;
  }
  return 0;
}

/* Writes `data` (`bytes`) as an array of `descr` and shape shape[0 .. rank - 1] to `path`. Returns 0, or -1 with
   the reason in `message`. */
static inline int kg_npy_write(const char *path, const char *descr, int rank, const size_t *shape, const void *data,
                               size_t bytes, char *message, size_t message_size)
{
  char shape_text[160], header[320];
  kg_npy_shape_text(rank, shape, shape_text, sizeof shape_text);
  int length = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                        shape_text);
  while ((10 + length + 1) % 64 != 0) { /* numpy pads the header so the data starts 64-byte aligned */
    header[length++] = ' ';
  }
  header[length++] = '\n';
  const unsigned char lead[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(length & 0xFF),
                                  (unsigned char)(length >> 8)};
  FILE *out = fopen(path, "wb");
  if (out == NULL) {
    snprintf(message, message_size, "cannot create it");
    return -1;
  }
  const int written = fwrite(lead, 1, sizeof lead, out) == sizeof lead &&
                      fwrite(header, 1, (size_t)length, out) == (size_t)length &&
                      fwrite(data, 1, bytes, out) == bytes;
  if (fclose(out) != 0 || !written) {
    snprintf(message, message_size, "cannot write it");
    return -1;
  }
  return 0;
}

#endif /* KG_NPY_H */
