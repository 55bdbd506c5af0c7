#ifndef ORCHARD_CCURL_SHIM_H
#define ORCHARD_CCURL_SHIM_H
/* OpenSSL's module first, for the same module clash as CLibevent's. */
#include "../COpenSSL/shim.h"
#include <curl/curl.h>
#endif
