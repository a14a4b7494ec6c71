/* DOCA 2.9 basic types (subset). */
#ifndef DOCA_TYPES_H_
#define DOCA_TYPES_H_
#include <stdint.h>

typedef uint16_t doca_be16_t; /* big endian */
typedef uint32_t doca_be32_t;
typedef uint64_t doca_be64_t;

struct doca_dev;

#endif
