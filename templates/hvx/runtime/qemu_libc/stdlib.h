/* The part of <stdlib.h> a network program uses, for the freestanding qemu-hexagon build (kg_libc.c). */
#ifndef KG_QEMU_STDLIB_H
#define KG_QEMU_STDLIB_H

#include <stddef.h>

void *malloc(size_t size); /* 16-byte aligned, from mmap */
void free(void *pointer);  /* keeps the memory: a program runs once and exits */
long strtol(const char *text, char **end, int base);
unsigned long strtoul(const char *text, char **end, int base);
void qsort(void *base, size_t count, size_t size, int (*compare)(const void *, const void *));

#endif /* KG_QEMU_STDLIB_H */
