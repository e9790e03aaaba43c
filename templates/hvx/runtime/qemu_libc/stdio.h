/* The part of <stdio.h> a network program (templates/_common/program) uses, for a freestanding Hexagon build under
   qemu-hexagon, which has no C library (kg_libc.c implements it on kg_runtime.h). A device build uses the Hexagon
   SDK's own C library instead. */
#ifndef KG_QEMU_STDIO_H
#define KG_QEMU_STDIO_H

#include <stdarg.h>
#include <stddef.h>

typedef struct kg_file FILE;
extern FILE *stdout;
extern FILE *stderr;

#define EOF (-1)
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2

FILE *fopen(const char *path, const char *mode); /* "r", "rb": the whole file is read at once; "w", "wb" */
int fclose(FILE *file);
size_t fread(void *data, size_t size, size_t count, FILE *file);
size_t fwrite(const void *data, size_t size, size_t count, FILE *file);
int fgetc(FILE *file);
int fseek(FILE *file, long offset, int whence); /* files opened for reading */
long ftell(FILE *file);

/* Conversions: d i u x X c s p f % with flags - and 0, a width, a precision (numbers or *) and the lengths
   hh h l ll z. */
int vsnprintf(char *text, size_t size, const char *format, va_list args);
int snprintf(char *text, size_t size, const char *format, ...);
int fprintf(FILE *file, const char *format, ...);
int printf(const char *format, ...);

#endif /* KG_QEMU_STDIO_H */
