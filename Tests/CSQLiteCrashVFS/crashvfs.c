// Test support, not shipped: a SQLite VFS over the default (unix) VFS that simulates power loss and disk errors,
// in the manner of SQLite's own crash tests (src/test6.c, src/test_devsym.c).
//
// Only files under an enrolled path prefix are simulated; the others pass straight through to the unix VFS, so
// the VFS can be the default of a test process whose other suites do not use it. The model for the enrolled
// files is the operating system's page cache. Writes to the database, its write-ahead log and its rollback
// journal stay in memory, in 512-byte sectors shared by every handle of the process on the same path, until
// xSync writes them to the real file and fsyncs it: the real file holds exactly what has reached the disk. A
// SIGKILL of the process is therefore a power loss that discards every unsynced write. A simulated power loss
// inside the process (orchard_crashvfs_power_loss, or a crash scheduled with orchard_crashvfs_crash_at) can also
// tear: each unsynced sector is kept, dropped or replaced by garbage, an unsynced truncation happens or not, and
// a file created since its directory was last synced may vanish. The directory is synced, as the unix VFS does,
// by the first sync of a write-ahead log or journal it created. Deletions are durable at once (a simplification).
//
// Torn sectors follow SQLITE_IOCAP_POWERSAFE_OVERWRITE, which the unix VFS reports: garbage lands only on the
// bytes written since the sector was last synced, never on the synced bytes around them. Shared memory (the -shm
// wal-index) is passed through: SQLite rebuilds it from the log when the first connection opens. Memory mapping
// is refused (xFetch gives no pointer), so every read goes through xRead.
//
// Disk errors: orchard_crashvfs_fail makes a write fail (EIO: SQLITE_IOERR_WRITE, ENOSPC: SQLITE_FULL) with
// nothing written, or a sync fail (SQLITE_IOERR_FSYNC) after which the data it should have written stays
// readable but is marked clean and will never reach the disk, as Linux does after a failed writeback: a later
// sync that succeeds does not bring it back.
//
// Limits: one process at a time per file (another process sees only synced data); every handle on a file must be
// closed after a power loss before the file is opened again.
#include "CSQLiteCrashVFS.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SECTOR 512

typedef struct Block {
    int ghost;   // readable, but a failed sync marked it clean: it never reaches the disk
    int lo, hi;  // the bytes written since the sector was last clean (a torn write damages only these)
    unsigned char data[SECTOR];
} Block;

typedef struct Node {
    char *path;
    int refs;
    int dead;    // power was lost: every read, write and sync through an old handle fails
    int listed;  // found by path (not yet deleted or powered off)
    sqlite3_int64 size;
    sqlite3_int64 truncLow;  // lowest size truncated to since the last sync, or -1
    Block **blocks;
    sqlite3_int64 nBlocks;
    int entryUnsynced;  // created since its directory was last synced
    struct Node *next;
} Node;

typedef struct CrashFile {
    sqlite3_file base;
    Node *node;           // NULL: temporary files, passed through
    int syncsDirectory;   // a log or journal this handle created: its first sync also syncs the directory
    sqlite3_file *real;   // the unix VFS's file, allocated right after this struct
    sqlite3_int64 align;  // keeps the real file 8-byte aligned
} CrashFile;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Node *nodes;
static sqlite3_vfs *realVfs;
static sqlite3_vfs crashVfs;
static sqlite3_io_methods methods;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int registerResult = SQLITE_OK;

// Faults, one per path prefix, so tests on different directories inject their own at the same time.
typedef struct Fault {
    char *prefix;
    int operation, errorNumber, after, persistent, fired;
    long hits, operationsAfter;
} Fault;
static Fault *faults;
static int faultCount;

static Fault *faultFor(const char *prefix) {
    for (int i = 0; i < faultCount; i++) {
        if (strcmp(faults[i].prefix, prefix) == 0) return &faults[i];
    }
    return NULL;
}

static char **enrolled;
static int enrolledCount;

static int crashOperation;
static long crashAfter;
static unsigned int crashSeed;

static int matches(const char *prefix, const char *path) { return strncmp(path, prefix, strlen(prefix)) == 0; }

static int isEnrolled(const char *path) {
    for (int i = 0; i < enrolledCount; i++) {
        if (matches(enrolled[i], path)) return 1;
    }
    return 0;
}

static unsigned int nextRandom(unsigned int *state) {
    unsigned int x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x ? x : 0x9E3779B9u;
    return x;
}

static void freeBlocks(Node *node, sqlite3_int64 from) {
    for (sqlite3_int64 i = from; i < node->nBlocks; i++) {
        free(node->blocks[i]);
        node->blocks[i] = NULL;
    }
}

static void freeNode(Node *node) {
    freeBlocks(node, 0);
    free(node->blocks);
    free(node->path);
    free(node);
}

static void unlist(Node *node) {
    for (Node **link = &nodes; *link; link = &(*link)->next) {
        if (*link == node) {
            *link = node->next;
            break;
        }
    }
    node->listed = 0;
    node->next = NULL;
}

static int isClean(const Node *node) {
    if (node->truncLow >= 0 || node->entryUnsynced) return 0;
    for (sqlite3_int64 i = 0; i < node->nBlocks; i++) {
        if (node->blocks[i]) return 0;
    }
    return 1;
}

static Node *findNode(const char *path) {
    for (Node *node = nodes; node; node = node->next) {
        if (strcmp(node->path, path) == 0) return node;
    }
    return NULL;
}

// The simulated power loss, `lock` held.
static int powerLossLocked(const char *prefix, int tear, unsigned int seed) {
    unsigned int state = seed ? seed : 1;
    int affected = 0;
    Node *node = nodes;
    while (node) {
        Node *next = node->next;
        if (!matches(prefix, node->path)) {
            node = next;
            continue;
        }
        affected++;
        if (tear) {
            int fd = open(node->path, O_WRONLY);
            if (fd >= 0) {
                if (node->truncLow >= 0 && nextRandom(&state) % 2) {
                    if (ftruncate(fd, node->truncLow) != 0) { /* the test sees the file as it is */
                    }
                }
                for (sqlite3_int64 i = 0; i < node->nBlocks; i++) {
                    Block *block = node->blocks[i];
                    if (!block) continue;
                    sqlite3_int64 offset = i * SECTOR;
                    sqlite3_int64 length = node->size - offset;
                    if (length > SECTOR) length = SECTOR;
                    if (length <= 0) continue;
                    unsigned int choice = nextRandom(&state) % 3;
                    if (choice == 0) continue;  // never written
                    unsigned char garbage[SECTOR];
                    const unsigned char *bytes = block->data;
                    if (choice == 2) {
                        memcpy(garbage, block->data, SECTOR);
                        for (int k = block->lo; k < block->hi; k++) garbage[k] = (unsigned char)nextRandom(&state);
                        bytes = garbage;
                    }
                    if (pwrite(fd, bytes, (size_t)length, offset) != length) { /* as above */
                    }
                }
                close(fd);
            }
            if (node->entryUnsynced && nextRandom(&state) % 2) unlink(node->path);
        } else if (node->entryUnsynced) {
            unlink(node->path);
        }
        freeBlocks(node, 0);
        node->truncLow = -1;
        node->dead = 1;
        unlist(node);
        if (node->refs == 0) freeNode(node);
        node = next;
    }
    return affected;
}

// Whether the scheduled crash is due; crashes the process if so. `lock` held.
static void crashCheck(int operation) {
    if (crashOperation != operation) return;
    if (crashAfter-- > 0) return;
    powerLossLocked("", 1, crashSeed);
    _exit(137);
}

// The errno the faults give this operation, or 0. `lock` held.
static int faultCheck(const Node *node, int operation) {
    int result = 0;
    for (int i = 0; i < faultCount; i++) {
        Fault *fault = &faults[i];
        if (!matches(fault->prefix, node->path)) continue;
        if (fault->fired) fault->operationsAfter++;
        if (operation != fault->operation) continue;
        if (fault->fired) {
            if (!fault->persistent) continue;
            fault->hits++;
            result = fault->errorNumber;
        } else if (fault->after > 0) {
            fault->after--;
        } else {
            fault->fired = 1;
            fault->hits++;
            result = fault->errorNumber;
        }
    }
    return result;
}

// Reads the current content of [offset, offset + amount) below the node's size: dirty sectors from memory,
// the rest from the real file (zeros past a pending truncation). `lock` held.
static int readView(CrashFile *file, unsigned char *out, sqlite3_int64 offset, sqlite3_int64 amount) {
    Node *node = file->node;
    sqlite3_int64 end = offset + amount;
    sqlite3_int64 limit = node->truncLow >= 0 && node->truncLow < node->size ? node->truncLow : node->size;
    sqlite3_int64 position = offset;
    while (position < end) {
        sqlite3_int64 sector = position / SECTOR;
        sqlite3_int64 sectorEnd = (sector + 1) * SECTOR < end ? (sector + 1) * SECTOR : end;
        Block *block = sector < node->nBlocks ? node->blocks[sector] : NULL;
        if (block) {
            memcpy(out + (position - offset), block->data + (position - sector * SECTOR),
                   (size_t)(sectorEnd - position));
            position = sectorEnd;
            continue;
        }
        sqlite3_int64 runEnd = sectorEnd;
        while (runEnd < end) {
            sqlite3_int64 next = runEnd / SECTOR;
            if (next < node->nBlocks && node->blocks[next]) break;
            runEnd = (next + 1) * SECTOR < end ? (next + 1) * SECTOR : end;
        }
        sqlite3_int64 realEnd = runEnd < limit ? runEnd : limit;
        if (realEnd > position) {
            int rc = file->real->pMethods->xRead(file->real, out + (position - offset), (int)(realEnd - position),
                                                 position);
            if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
        }
        sqlite3_int64 zeroFrom = realEnd > position ? realEnd : position;
        if (runEnd > zeroFrom) memset(out + (zeroFrom - offset), 0, (size_t)(runEnd - zeroFrom));
        position = runEnd;
    }
    return SQLITE_OK;
}

// The in-memory sector `sector`, loaded from the current content when first written. `lock` held.
static Block *sectorFor(CrashFile *file, sqlite3_int64 sector, int *rc) {
    Node *node = file->node;
    if (sector >= node->nBlocks) {
        sqlite3_int64 count = node->nBlocks ? node->nBlocks : 64;
        while (count <= sector) count *= 2;
        Block **grown = realloc(node->blocks, (size_t)count * sizeof(Block *));
        if (!grown) {
            *rc = SQLITE_IOERR_NOMEM;
            return NULL;
        }
        memset(grown + node->nBlocks, 0, (size_t)(count - node->nBlocks) * sizeof(Block *));
        node->blocks = grown;
        node->nBlocks = count;
    }
    if (node->blocks[sector]) return node->blocks[sector];
    Block *block = calloc(1, sizeof(Block));
    if (!block) {
        *rc = SQLITE_IOERR_NOMEM;
        return NULL;
    }
    block->lo = SECTOR;
    sqlite3_int64 start = sector * SECTOR;
    if (start < node->size) {
        sqlite3_int64 length = node->size - start < SECTOR ? node->size - start : SECTOR;
        int read = readView(file, block->data, start, length);
        if (read != SQLITE_OK) {
            free(block);
            *rc = read;
            return NULL;
        }
    }
    node->blocks[sector] = block;
    return block;
}

// MARK: File methods

static int crashClose(sqlite3_file *handle) {
    CrashFile *file = (CrashFile *)handle;
    Node *node = file->node;
    if (node) {
        pthread_mutex_lock(&lock);
        node->refs--;
        if (node->refs == 0 && (!node->listed || isClean(node))) {
            if (node->listed) unlist(node);
            freeNode(node);
        }
        pthread_mutex_unlock(&lock);
        file->node = NULL;
    }
    return file->real->pMethods->xClose(file->real);
}

static int crashRead(sqlite3_file *handle, void *buffer, int amount, sqlite3_int64 offset) {
    CrashFile *file = (CrashFile *)handle;
    if (!file->node) return file->real->pMethods->xRead(file->real, buffer, amount, offset);
    pthread_mutex_lock(&lock);
    int rc = SQLITE_OK;
    if (file->node->dead) {
        rc = SQLITE_IOERR_READ;
    } else {
        sqlite3_int64 available = file->node->size - offset;
        int take = available <= 0 ? 0 : (available < amount ? (int)available : amount);
        if (take > 0) rc = readView(file, buffer, offset, take);
        if (rc == SQLITE_OK && take < amount) {
            memset((unsigned char *)buffer + take, 0, (size_t)(amount - take));
            rc = SQLITE_IOERR_SHORT_READ;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int crashWrite(sqlite3_file *handle, const void *buffer, int amount, sqlite3_int64 offset) {
    CrashFile *file = (CrashFile *)handle;
    if (!file->node) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    pthread_mutex_lock(&lock);
    Node *node = file->node;
    int rc = SQLITE_OK;
    if (node->dead) {
        rc = SQLITE_IOERR_WRITE;
    } else {
        crashCheck(ORCHARD_CRASHVFS_WRITE);
        int error = faultCheck(node, ORCHARD_CRASHVFS_WRITE);
        if (error) {
            rc = error == ENOSPC ? SQLITE_FULL : SQLITE_IOERR_WRITE;
        } else {
            const unsigned char *bytes = buffer;
            sqlite3_int64 position = offset, end = offset + amount;
            while (position < end && rc == SQLITE_OK) {
                sqlite3_int64 sector = position / SECTOR;
                sqlite3_int64 sectorEnd = (sector + 1) * SECTOR < end ? (sector + 1) * SECTOR : end;
                Block *block = sectorFor(file, sector, &rc);
                if (!block) break;
                int from = (int)(position - sector * SECTOR), to = (int)(sectorEnd - sector * SECTOR);
                memcpy(block->data + from, bytes + (position - offset), (size_t)(to - from));
                block->ghost = 0;
                if (from < block->lo) block->lo = from;
                if (to > block->hi) block->hi = to;
                position = sectorEnd;
            }
            if (rc == SQLITE_OK && end > node->size) node->size = end;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int crashTruncate(sqlite3_file *handle, sqlite3_int64 size) {
    CrashFile *file = (CrashFile *)handle;

    if (!file->node) return file->real->pMethods->xTruncate(file->real, size);
    pthread_mutex_lock(&lock);
    Node *node = file->node;
    int rc = SQLITE_OK;
    if (node->dead) {
        rc = SQLITE_IOERR_TRUNCATE;
    } else {
        sqlite3_int64 low = size < node->size ? size : node->size;
        if (node->truncLow < 0 || low < node->truncLow) node->truncLow = low;
        sqlite3_int64 keep = (size + SECTOR - 1) / SECTOR;
        if (keep < node->nBlocks) freeBlocks(node, keep);
        sqlite3_int64 partial = size / SECTOR;
        if (size % SECTOR && partial < node->nBlocks && node->blocks[partial]) {
            memset(node->blocks[partial]->data + size % SECTOR, 0, (size_t)(SECTOR - size % SECTOR));
        }
        node->size = size;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int crashSync(sqlite3_file *handle, int flags) {
    CrashFile *file = (CrashFile *)handle;
    if (!file->node) return file->real->pMethods->xSync(file->real, flags);
    pthread_mutex_lock(&lock);
    Node *node = file->node;
    int rc = SQLITE_OK;
    if (node->dead) {
        rc = SQLITE_IOERR_FSYNC;
    } else {
        crashCheck(ORCHARD_CRASHVFS_SYNC);
        if (faultCheck(node, ORCHARD_CRASHVFS_SYNC)) {
            // The writeback failed: the data stays readable but is clean now, and never reaches the disk.
            for (sqlite3_int64 i = 0; i < node->nBlocks; i++) {
                if (node->blocks[i]) node->blocks[i]->ghost = 1;
            }
            rc = SQLITE_IOERR_FSYNC;
        } else {
            sqlite3_file *real = file->real;
            if (node->truncLow >= 0) rc = real->pMethods->xTruncate(real, node->truncLow);
            for (sqlite3_int64 i = 0; i < node->nBlocks && rc == SQLITE_OK; i++) {
                Block *block = node->blocks[i];
                if (!block || block->ghost) continue;
                sqlite3_int64 length = node->size - i * SECTOR < SECTOR ? node->size - i * SECTOR : SECTOR;
                if (length > 0) rc = real->pMethods->xWrite(real, block->data, (int)length, i * SECTOR);
            }
            sqlite3_int64 realSize = 0;
            if (rc == SQLITE_OK) rc = real->pMethods->xFileSize(real, &realSize);
            if (rc == SQLITE_OK && realSize != node->size) rc = real->pMethods->xTruncate(real, node->size);
            if (rc == SQLITE_OK) rc = real->pMethods->xSync(real, flags);
            if (rc == SQLITE_OK) {
                for (sqlite3_int64 i = 0; i < node->nBlocks; i++) {
                    if (node->blocks[i] && !node->blocks[i]->ghost) {
                        free(node->blocks[i]);
                        node->blocks[i] = NULL;
                    }
                }
                node->truncLow = -1;
                if (file->syncsDirectory) {
                    file->syncsDirectory = 0;
                    const char *slash = strrchr(node->path, '/');
                    size_t directoryLength = slash ? (size_t)(slash - node->path) + 1 : 0;
                    for (Node *other = nodes; other; other = other->next) {
                        if (strncmp(other->path, node->path, directoryLength) == 0 &&
                            !strchr(other->path + directoryLength, '/')) {
                            other->entryUnsynced = 0;
                        }
                    }
                    node->entryUnsynced = 0;
                }
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int crashFileSize(sqlite3_file *handle, sqlite3_int64 *size) {
    CrashFile *file = (CrashFile *)handle;
    if (!file->node) return file->real->pMethods->xFileSize(file->real, size);
    pthread_mutex_lock(&lock);
    int rc = file->node->dead ? SQLITE_IOERR_FSTAT : SQLITE_OK;
    if (rc == SQLITE_OK) *size = file->node->size;
    pthread_mutex_unlock(&lock);
    return rc;
}

static int crashLock(sqlite3_file *handle, int level) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xLock(file->real, level);
}

static int crashUnlock(sqlite3_file *handle, int level) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int crashCheckReservedLock(sqlite3_file *handle, int *reserved) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xCheckReservedLock(file->real, reserved);
}

static int crashFileControl(sqlite3_file *handle, int operation, void *argument) {
    CrashFile *file = (CrashFile *)handle;
    // No memory mapping (every read must see the unsynced sectors), and no preallocation of the real file.
    if (operation == SQLITE_FCNTL_MMAP_SIZE && file->node) return SQLITE_NOTFOUND;
    if (operation == SQLITE_FCNTL_SIZE_HINT && file->node) return SQLITE_OK;
    return file->real->pMethods->xFileControl(file->real, operation, argument);
}

static int crashSectorSize(sqlite3_file *handle) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xSectorSize(file->real);
}

static int crashDeviceCharacteristics(sqlite3_file *handle) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

static int crashShmMap(sqlite3_file *handle, int region, int size, int extend, void volatile **pointer) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xShmMap(file->real, region, size, extend, pointer);
}

static int crashShmLock(sqlite3_file *handle, int offset, int count, int flags) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xShmLock(file->real, offset, count, flags);
}

static void crashShmBarrier(sqlite3_file *handle) {
    CrashFile *file = (CrashFile *)handle;
    file->real->pMethods->xShmBarrier(file->real);
}

static int crashShmUnmap(sqlite3_file *handle, int deleteFlag) {
    CrashFile *file = (CrashFile *)handle;
    return file->real->pMethods->xShmUnmap(file->real, deleteFlag);
}

static int crashFetch(sqlite3_file *handle, sqlite3_int64 offset, int amount, void **pointer) {
    CrashFile *file = (CrashFile *)handle;
    if (!file->node) return file->real->pMethods->xFetch(file->real, offset, amount, pointer);
    *pointer = NULL;
    return SQLITE_OK;
}

static int crashUnfetch(sqlite3_file *handle, sqlite3_int64 offset, void *pointer) {
    CrashFile *file = (CrashFile *)handle;
    if (!file->node) return file->real->pMethods->xUnfetch(file->real, offset, pointer);
    return SQLITE_OK;
}

// MARK: VFS methods

static int crashOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *handle, int flags, int *outFlags) {
    (void)vfs;
    CrashFile *file = (CrashFile *)handle;
    file->real = (sqlite3_file *)&file[1];
    file->node = NULL;
    file->syncsDirectory = 0;
    int kinds = SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | SQLITE_OPEN_SUPER_JOURNAL;
    pthread_mutex_lock(&lock);
    int tracked = name && !(flags & SQLITE_OPEN_DELETEONCLOSE) && (flags & kinds) && isEnrolled(name);
    pthread_mutex_unlock(&lock);
    int existed = tracked && access(name, F_OK) == 0;
    int rc = realVfs->xOpen(realVfs, name, file->real, flags, outFlags);
    if (rc != SQLITE_OK) {
        handle->pMethods = NULL;
        return rc;
    }
    handle->pMethods = &methods;
    if (!tracked) return SQLITE_OK;
    pthread_mutex_lock(&lock);
    Node *node = findNode(name);
    if (!node) {
        sqlite3_int64 size = 0;
        rc = file->real->pMethods->xFileSize(file->real, &size);
        node = rc == SQLITE_OK ? calloc(1, sizeof(Node)) : NULL;
        if (node) node->path = strdup(name);
        if (!node || !node->path) {
            free(node);
            pthread_mutex_unlock(&lock);
            file->real->pMethods->xClose(file->real);
            handle->pMethods = NULL;
            return rc == SQLITE_OK ? SQLITE_NOMEM : rc;
        }
        node->size = size;
        node->truncLow = -1;
        node->entryUnsynced = !existed && (flags & SQLITE_OPEN_CREATE);
        node->listed = 1;
        node->next = nodes;
        nodes = node;
    }
    node->refs++;
    file->node = node;
    int journal = flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | SQLITE_OPEN_SUPER_JOURNAL);
    file->syncsDirectory = !existed && (flags & SQLITE_OPEN_CREATE) && journal;
    pthread_mutex_unlock(&lock);
    return SQLITE_OK;
}

static int crashDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    pthread_mutex_lock(&lock);
    Node *node = findNode(name);
    if (node) {
        unlist(node);
        if (node->refs == 0) freeNode(node);
    }
    pthread_mutex_unlock(&lock);
    return realVfs->xDelete(realVfs, name, syncDirectory);
}

static int crashAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return realVfs->xAccess(realVfs, name, flags, result);
}

static int crashFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return realVfs->xFullPathname(realVfs, name, size, out);
}

static void *crashDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return realVfs->xDlOpen(realVfs, name);
}

static void crashDlError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    realVfs->xDlError(realVfs, size, out);
}

static void (*crashDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return realVfs->xDlSym(realVfs, library, symbol);
}

static void crashDlClose(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    realVfs->xDlClose(realVfs, library);
}

static int crashRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return realVfs->xRandomness(realVfs, size, out);
}

static int crashSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return realVfs->xSleep(realVfs, microseconds);
}

static int crashCurrentTime(sqlite3_vfs *vfs, double *now) {
    (void)vfs;
    return realVfs->xCurrentTime(realVfs, now);
}

static int crashGetLastError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return realVfs->xGetLastError(realVfs, size, out);
}

static int crashCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    (void)vfs;
    return realVfs->xCurrentTimeInt64(realVfs, now);
}

static void registerOnce(void) {
    realVfs = sqlite3_vfs_find(NULL);
    if (!realVfs || realVfs->iVersion < 2) {
        registerResult = SQLITE_ERROR;
        return;
    }
    methods.iVersion = 3;
    methods.xClose = crashClose;
    methods.xRead = crashRead;
    methods.xWrite = crashWrite;
    methods.xTruncate = crashTruncate;
    methods.xSync = crashSync;
    methods.xFileSize = crashFileSize;
    methods.xLock = crashLock;
    methods.xUnlock = crashUnlock;
    methods.xCheckReservedLock = crashCheckReservedLock;
    methods.xFileControl = crashFileControl;
    methods.xSectorSize = crashSectorSize;
    methods.xDeviceCharacteristics = crashDeviceCharacteristics;
    methods.xShmMap = crashShmMap;
    methods.xShmLock = crashShmLock;
    methods.xShmBarrier = crashShmBarrier;
    methods.xShmUnmap = crashShmUnmap;
    methods.xFetch = crashFetch;
    methods.xUnfetch = crashUnfetch;

    crashVfs.iVersion = 2;
    crashVfs.szOsFile = (int)sizeof(CrashFile) + realVfs->szOsFile;
    crashVfs.mxPathname = realVfs->mxPathname;
    crashVfs.zName = "orchard-crash";
    crashVfs.xOpen = crashOpen;
    crashVfs.xDelete = crashDelete;
    crashVfs.xAccess = crashAccess;
    crashVfs.xFullPathname = crashFullPathname;
    crashVfs.xDlOpen = crashDlOpen;
    crashVfs.xDlError = crashDlError;
    crashVfs.xDlSym = crashDlSym;
    crashVfs.xDlClose = crashDlClose;
    crashVfs.xRandomness = crashRandomness;
    crashVfs.xSleep = crashSleep;
    crashVfs.xCurrentTime = crashCurrentTime;
    crashVfs.xGetLastError = crashGetLastError;
    crashVfs.xCurrentTimeInt64 = crashCurrentTimeInt64;
    registerResult = sqlite3_vfs_register(&crashVfs, 1);
}

// MARK: Control

int orchard_crashvfs_register(void) {
    pthread_once(&once, registerOnce);
    return registerResult;
}

int orchard_crashvfs_enroll(const char *prefix) {
    pthread_mutex_lock(&lock);
    int rc = SQLITE_OK;
    if (!isEnrolled(prefix)) {
        char **grown = realloc(enrolled, (size_t)(enrolledCount + 1) * sizeof(char *));
        char *copy = strdup(prefix);
        if (grown) enrolled = grown;
        if (grown && copy) {
            enrolled[enrolledCount++] = copy;
        } else {
            free(copy);
            rc = SQLITE_NOMEM;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int orchard_crashvfs_power_loss(const char *prefix, int tear, unsigned int seed) {
    pthread_mutex_lock(&lock);
    int affected = powerLossLocked(prefix, tear, seed);
    pthread_mutex_unlock(&lock);
    return affected;
}

void orchard_crashvfs_fail(const char *prefix, int operation, int error_number, int after, int persistent) {
    pthread_mutex_lock(&lock);
    Fault *fault = faultFor(prefix);
    if (!fault) {
        Fault *grown = realloc(faults, (size_t)(faultCount + 1) * sizeof(Fault));
        char *copy = strdup(prefix);
        if (grown) faults = grown;
        if (grown && copy) {
            fault = &faults[faultCount++];
            memset(fault, 0, sizeof *fault);
            fault->prefix = copy;
        } else {
            free(copy);
        }
    }
    if (fault) {
        fault->operation = operation;
        fault->errorNumber = error_number;
        fault->after = after;
        fault->persistent = persistent;
        fault->fired = 0;
        fault->hits = 0;
        fault->operationsAfter = 0;
    }
    pthread_mutex_unlock(&lock);
}

void orchard_crashvfs_clear_fault(const char *prefix) {
    pthread_mutex_lock(&lock);
    Fault *fault = faultFor(prefix);
    if (fault) fault->operation = 0;  // matches no operation; its counters stay readable
    pthread_mutex_unlock(&lock);
}

long orchard_crashvfs_fault_hits(const char *prefix) {
    pthread_mutex_lock(&lock);
    Fault *fault = faultFor(prefix);
    long hits = fault ? fault->hits : 0;
    pthread_mutex_unlock(&lock);
    return hits;
}

long orchard_crashvfs_operations_after_fault(const char *prefix) {
    pthread_mutex_lock(&lock);
    Fault *fault = faultFor(prefix);
    long count = fault ? fault->operationsAfter : 0;
    pthread_mutex_unlock(&lock);
    return count;
}

long long orchard_crashvfs_unsynced_bytes(const char *prefix) {
    pthread_mutex_lock(&lock);
    long long bytes = 0;
    for (Node *node = nodes; node; node = node->next) {
        if (!matches(prefix, node->path)) continue;
        for (sqlite3_int64 i = 0; i < node->nBlocks; i++) {
            if (node->blocks[i] && !node->blocks[i]->ghost) bytes += SECTOR;
        }
    }
    pthread_mutex_unlock(&lock);
    return bytes;
}

void orchard_crashvfs_crash_at(int operation, long after, unsigned int seed) {
    pthread_mutex_lock(&lock);
    crashOperation = operation;
    crashAfter = after;
    crashSeed = seed;
    pthread_mutex_unlock(&lock);
}
