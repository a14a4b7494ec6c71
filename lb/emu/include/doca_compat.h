/* DOCA's API stability markers; empty in the emulation. */
#ifndef DOCA_COMPAT_H_
#define DOCA_COMPAT_H_
#define DOCA_EXPERIMENTAL
#define DOCA_STABLE
#endif
