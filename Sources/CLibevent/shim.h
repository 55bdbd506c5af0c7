#ifndef ORCHARD_CLIBEVENT_SHIM_H
#define ORCHARD_CLIBEVENT_SHIM_H
/* OpenSSL's module first: otherwise clang sees glibc's fd_set defined in two modules (see notes/stack.md). */
#include "../COpenSSL/shim.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>
#endif
