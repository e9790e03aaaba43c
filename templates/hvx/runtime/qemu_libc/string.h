/* The part of <string.h> a network program uses, for the freestanding qemu-hexagon build (kg_libc.c; memcpy,
   memset and memmove: kg_libcalls.c). */
#ifndef KG_QEMU_STRING_H
#define KG_QEMU_STRING_H

#include <stddef.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memset(void *dst, int c, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *text);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
char *strchr(const char *text, int c);
char *strrchr(const char *text, int c);
char *strstr(const char *text, const char *part);

#endif /* KG_QEMU_STRING_H */
