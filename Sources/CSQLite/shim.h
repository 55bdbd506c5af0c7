#ifndef ORCHARD_CSQLITE_SHIM_H
#define ORCHARD_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
