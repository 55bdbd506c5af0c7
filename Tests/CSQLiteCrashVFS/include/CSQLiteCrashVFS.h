// Test support, not shipped: a SQLite VFS that simulates power loss and disk errors (see crashvfs.c).
#ifndef ORCHARD_CSQLITE_CRASH_VFS_H
#define ORCHARD_CSQLITE_CRASH_VFS_H

/// What a fault or a crash is attached to.
enum {
    ORCHARD_CRASHVFS_WRITE = 1,
    ORCHARD_CRASHVFS_SYNC = 2,
};

/// Registers the "orchard-crash" VFS over SQLite's default VFS and makes it the default. Idempotent.
/// Returns a SQLite result code.
int orchard_crashvfs_register(void);

/// Simulates the files whose path starts with `prefix` ("" for every file) from now on; other files pass straight
/// through. Returns a SQLite result code.
int orchard_crashvfs_enroll(const char *prefix);

/// Simulates a power loss for every file whose path starts with `prefix`: data written but not synced is
/// discarded (`tear` 0) or, sector by sector, kept, discarded or replaced by garbage (`tear` 1, chosen by
/// `seed`); a file whose directory entry was never synced disappears, an unsynced truncation may or may not
/// have happened. Handles already open on those files fail every later read, write and sync (the machine is
/// off); files opened afterwards see what reached the disk. Close every connection before opening new ones.
/// Returns the number of files affected.
int orchard_crashvfs_power_loss(const char *prefix, int tear, unsigned int seed);

/// Makes the `after`+1-th write or sync (`operation`) on a file whose path starts with `prefix` fail with
/// `error_number` (EIO or ENOSPC): writes fail without changing anything, a failed sync leaves the data it
/// should have written readable but never written (as Linux does after a failed writeback). `persistent`: every
/// later operation of that kind fails too. Replaces the fault of the same prefix; faults of other prefixes stay.
void orchard_crashvfs_fail(const char *prefix, int operation, int error_number, int after, int persistent);

/// Disarms the fault of `prefix` (its counters stay readable).
void orchard_crashvfs_clear_fault(const char *prefix);

/// How many times the fault of `prefix` fired.
long orchard_crashvfs_fault_hits(const char *prefix);

/// How many writes and syncs were attempted on the files of the fault of `prefix` after it first fired.
long orchard_crashvfs_operations_after_fault(const char *prefix);

/// Bytes written but not synced in files whose path starts with `prefix`.
long long orchard_crashvfs_unsynced_bytes(const char *prefix);

/// Crashes the process (power loss with tearing by `seed`, then `_exit(137)`) at the start of the `after`+1-th
/// write or sync (`operation`) on any file.
void orchard_crashvfs_crash_at(int operation, long after, unsigned int seed);

#endif
