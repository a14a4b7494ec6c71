#ifndef XB_EMU_RTE_ERRNO_H
#define XB_EMU_RTE_ERRNO_H
#include <errno.h>
#define rte_errno errno
const char *rte_strerror(int errnum);
#endif
