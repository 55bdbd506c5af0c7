#ifndef ORCHARD_CLIBPQ_SHIM_H
#define ORCHARD_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
