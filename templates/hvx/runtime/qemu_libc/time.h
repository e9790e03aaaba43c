/* The part of <time.h> a network program uses, for the freestanding qemu-hexagon build (kg_libc.c). */
#ifndef KG_QEMU_TIME_H
#define KG_QEMU_TIME_H

struct timespec {
  long tv_sec;
  long tv_nsec;
};
typedef int clockid_t;
#define CLOCK_MONOTONIC 1

int clock_gettime(clockid_t clock, struct timespec *now); /* CLOCK_MONOTONIC only */

#endif /* KG_QEMU_TIME_H */
