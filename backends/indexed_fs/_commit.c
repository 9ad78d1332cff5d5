/* Group commit for local segments, outside the GIL.
 *
 * Why C: with many writer threads the pure-Python group commit spends its time handing the GIL
 * around, not waiting for the disk.  A durable put there releases and re-takes the GIL three or
 * four times (the pwrite, the commit lock, the wait, the wake-up), each a thread hand-off.  This
 * module brings that down to one release per put (what is left is CPython's own GIL hand-off):
 *
 *   - pwrite_all() appends a record while *holding* the GIL.  It is a page-cache copy of a
 *     record, short next to a thread hand-off; releasing the GIL around it only invites another
 *     thread to take over mid-append.
 *   - GroupCommit.wait(target) releases the GIL once and sleeps (on a futex of its own) until
 *     the first `target` bytes appended are durable.  A writer that finds no sync running
 *     syncs itself: a lone writer never waits for another thread (the 1-thread case stays as
 *     fast as a bare loop).  If writers queued behind it meanwhile, it hands the syncing over
 *     to the committer's sync thread, which runs syncs back to back, each covering everything
 *     appended so far, until no writer waits.  (Handing over to the first queued *writer*
 *     instead leaves a gap between syncs while that writer waits for a CPU.)
 *
 * The store tells the committer where the log ends after every append (appended()) and when a
 * segment was sealed durably (covered()); "bytes" are a store-wide clock, so a sync of the
 * active segment's fd covers everything appended before it.
 *
 * Putter (below) is a store's whole put in one call on top of this: append, keydir and wait,
 * the GIL released once, for the wait.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <time.h>
#include <string.h>
#include <stdlib.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include "_crc32c.h"

/* A writer waiting for a sync; lives on its own stack for the length of the wait.  It sleeps on
 * a futex of its own `state`, which whoever wakes it sets *after* unlinking it under `mu` and
 * releasing `mu`: the woken writer never has to take `mu` again (with a condition variable it
 * would, while the leader still holds it to wake the others: one more sleep per put). */
typedef struct waiter {
    long long target;
    atomic_int state;          /* WAITING, DONE (bytes durable) or FAILED (see err) */
    int err;                   /* errno of the failed sync that covered this writer */
    long long synced;          /* the committer's synced bytes when it let this writer go */
    struct waiter *next;
} waiter;

enum { WAITING, DONE, FAILED };

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t idle_cv;    /* signalled after each sync, for idle() */
    waiter *queue;             /* writers waiting for a sync, in arrival order */
    int tail_fd;               /* fd of the segment holding the newest bytes */
    long long written;         /* bytes appended so far (store-wide clock) */
    long long nwrites;         /* records appended so far */
    long long synced;          /* bytes known durable */
    long long synced_writes;   /* records known durable */
    int syncing;               /* a leader exists (it syncs, or is about to) */
    int sync_fd;               /* the fd inside fdatasync now, -1 if none */
    int idle_waiters;
    pthread_cond_t work_cv;    /* wakes the sync thread: writers are queued, or stop */
    pthread_t thread;
    int thread_started, thread_busy, stopping;
    atomic_int fork_gen;       /* fork_generation when this state was (re)made: see enter() */
    long long syncs, requests, max_batch, thread_syncs;
} GroupCommit;

static atomic_int fork_generation;  /* moves in every forked child */

/* Test hook (set_sync_delay): microseconds to sleep before every fdatasync, so that tests can
 * make writers queue behind a sync on any medium (tmpfs syncs are instant) instead of hoping
 * the disk is slow.  Zero outside tests: one relaxed load per sync. */
static atomic_llong sync_delay_us;

/* Set up / tear down a committer's C state (shared by the Python type and bare_threads()). */
static void commit_setup(GroupCommit *self, int fd, long long written, long long nwrites) {
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->idle_cv, NULL);
    pthread_cond_init(&self->work_cv, NULL);
    self->thread_started = self->thread_busy = self->stopping = 0;
    self->queue = NULL;
    self->idle_waiters = 0;
    self->tail_fd = fd;
    self->written = self->synced = written;
    self->nwrites = self->synced_writes = nwrites;
    self->syncing = 0;
    self->sync_fd = -1;
    self->syncs = self->requests = self->max_batch = self->thread_syncs = 0;
    atomic_store(&self->fork_gen, atomic_load(&fork_generation));
}

/* Lock `mu` on entry from the store.  In a child forked while the parent's committer was in
 * use, the sync thread, the queued writers (other threads' stacks) and possibly the lock's
 * holder stayed with the parent: the child starts over from what is known durable (as CPython
 * re-makes its own locks after a fork).  `fork_generation` moves in the child (pthread_atfork),
 * so the check costs one load per call. */
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;

static void enter(GroupCommit *self) {
    if (atomic_load(&self->fork_gen) != atomic_load(&fork_generation)) {
        pthread_mutex_lock(&fork_mu);
        if (atomic_load(&self->fork_gen) != atomic_load(&fork_generation)) {
            long long synced = self->synced, synced_writes = self->synced_writes;
            int tail_fd = self->tail_fd;
            commit_setup(self, tail_fd, synced, synced_writes);
        }
        pthread_mutex_unlock(&fork_mu);
    }
    pthread_mutex_lock(&self->mu);
}

static void after_fork_in_child(void) {
    pthread_mutex_init(&fork_mu, NULL);
    atomic_fetch_add(&fork_generation, 1);
}

static void stop_thread(GroupCommit *self);

static void commit_teardown(GroupCommit *self) {
    stop_thread(self);
    pthread_cond_destroy(&self->work_cv);
    pthread_cond_destroy(&self->idle_cv);
    pthread_mutex_destroy(&self->mu);
}

static int gc_init(GroupCommit *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"fd", "written", "nwrites", NULL};
    int fd;
    long long written = 0, nwrites = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|LL", names, &fd, &written, &nwrites))
        return -1;
    commit_setup(self, fd, written, nwrites);
    return 0;
}

static void gc_dealloc(GroupCommit *self) {
    Py_BEGIN_ALLOW_THREADS
    commit_teardown(self);
    Py_END_ALLOW_THREADS
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Unlink the queued writers whose bytes lie below `upto`, as a list to wake, giving each the
 * errno `err` (0: a sync covered them) (caller holds mu). */
static waiter *take_upto(GroupCommit *self, long long upto, int err) {
    waiter *out = NULL, **pp = &self->queue;
    while (*pp) {
        waiter *w = *pp;
        if (w->target <= upto) {
            *pp = w->next;
            w->err = err;
            w->synced = self->synced;
            w->next = out;
            out = w;
        } else {
            pp = &w->next;
        }
    }
    return out;
}

/* The queued writers whose bytes are durable now (caller holds mu). */
static waiter *take_covered(GroupCommit *self) {
    return take_upto(self, self->synced, 0);
}

/* Give each writer of `list` its `state` and wake it (caller has released mu).  A writer may
 * return the moment it sees its state, so `next` is read first; a wake-up of a futex whose
 * writer already left wakes nobody. */
static void wake(waiter *list, int state) {
    while (list) {
        waiter *next = list->next;
        atomic_store(&list->state, state);
        syscall(SYS_futex, &list->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        list = next;
    }
}

/* appended(fd, written, nwrites): the log now ends at `written` bytes, in segment `fd`. */
static PyObject *gc_appended(GroupCommit *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "appended(fd, written, nwrites)");
        return NULL;
    }
    int fd = PyLong_AsLong(args[0]);
    long long written = PyLong_AsLongLong(args[1]), nwrites = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    enter(self);
    self->tail_fd = fd;
    self->written = written;
    self->nwrites = nwrites;
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

/* covered(written, nwrites): everything up to `written` is durable by other means (a segment
 * sealed with fsync); wakes the writers that covers. */
static PyObject *gc_covered(GroupCommit *self, PyObject *args) {
    long long written, nwrites;
    if (!PyArg_ParseTuple(args, "LL", &written, &nwrites))
        return NULL;
    enter(self);
    if (written > self->synced) {
        self->synced = written;
        self->synced_writes = nwrites;
    }
    waiter *done = take_covered(self);
    pthread_mutex_unlock(&self->mu);
    wake(done, DONE);
    Py_RETURN_NONE;
}

/* One fdatasync of the segment holding the newest bytes (caller holds mu, which is released
 * around the sync).  Returns 0, or the errno of a failed sync, whose goal is put in *failed_goal. */
static int sync_once(GroupCommit *self, long long *failed_goal) {
    int fd = self->tail_fd;
    long long goal = self->written, nw = self->nwrites;
    self->sync_fd = fd;
    pthread_mutex_unlock(&self->mu);
    long long delay = atomic_load_explicit(&sync_delay_us, memory_order_relaxed);
    if (delay > 0) {
        struct timespec ts = {.tv_sec = delay / 1000000, .tv_nsec = (delay % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    int rc = fdatasync(fd);
    int e = errno;
    pthread_mutex_lock(&self->mu);
    self->sync_fd = -1;
    if (self->idle_waiters)
        pthread_cond_broadcast(&self->idle_cv);
    if (rc != 0) {
        *failed_goal = goal;
        return e;
    }
    if (goal > self->synced) {
        long long batch = nw - self->synced_writes;
        if (batch > self->max_batch)
            self->max_batch = batch;
        self->synced = goal;
        self->synced_writes = nw;
        self->syncs++;
    }
    return 0;
}

/* Sync for the queued writers until none is left; returns the number of syncs (caller holds
 * mu and leads). */
static long long drain(GroupCommit *self) {
    long long n = 0;
    while (self->queue) {
        long long goal = 0;
        int e = sync_once(self, &goal);
        n++;
        waiter *done = e ? take_upto(self, goal, e) : take_covered(self);
        pthread_mutex_unlock(&self->mu);
        wake(done, e ? FAILED : DONE);
        pthread_mutex_lock(&self->mu);
    }
    return n;
}

/* The sync thread (a plain pthread: it never takes the GIL).  A writer that finishes a sync
 * with writers queued behind it hands the syncing over to this thread, which runs syncs back
 * to back for as long as writers keep queueing.  Handing over to a queued *writer* instead
 * leaves a gap between syncs (the woken writer waits for a CPU that GIL-hungry threads hold);
 * this thread is already on a CPU when the sync ends and starts the next one at once. */
static void *sync_thread(void *arg) {
    GroupCommit *self = arg;
    pthread_mutex_lock(&self->mu);
    for (;;) {
        while (!self->thread_busy && !self->stopping)
            pthread_cond_wait(&self->work_cv, &self->mu);
        if (!self->thread_busy)
            break;  /* stopping, and no queue handed over (a writer may still lead: not ours) */
        self->thread_syncs += drain(self);
        self->thread_busy = 0;
        self->syncing = 0;
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

/* Hand the syncing for the queued writers to the sync thread, starting it on first use
 * (caller holds mu and is the leader; the thread ends the leadership when the queue drains).
 * Returns 0, or an errno if there is no thread to hand over to: it could not be started, or
 * close() stopped it.  Once stopping, a thread that has left its loop never looks at
 * `thread_busy` again, and a new one would never be joined: the leader then syncs for the
 * queued writers itself, so that no writer waits for a thread that is gone. */
static int hand_over(GroupCommit *self) {
    if (self->stopping)
        return ESHUTDOWN;
    if (!self->thread_started) {
        int rc = pthread_create(&self->thread, NULL, sync_thread, self);
        if (rc)
            return rc;
        pthread_setname_np(self->thread, "ckptbench-sync");  /* as top -H and perf show it */
        self->thread_started = 1;
    }
    self->thread_busy = 1;
    pthread_cond_signal(&self->work_cv);
    return 0;
}

/* Return once the first `target` bytes are durable: 0, or the errno of the sync that should
 * have covered them (writers appended after it get a sync, and a report, of their own).
 * *synced is what the committer had synced when it let the writer go (for the "ack <= synced"
 * books, without taking `mu` again after the wake-up).  Called without the GIL. */
static int commit_wait_synced(GroupCommit *self, long long target, long long *synced) {
    int err = 0;
    enter(self);
    self->requests++;
    if (self->synced >= target) {
        /* durable already (a sync that started after our append covered it) */
        *synced = self->synced;
        pthread_mutex_unlock(&self->mu);
    } else if (self->syncing) {
        waiter me = {.target = target, .state = WAITING};
        waiter **pp = &self->queue;
        while (*pp)
            pp = &(*pp)->next;
        *pp = &me;
        pthread_mutex_unlock(&self->mu);
        int st;
        while ((st = atomic_load(&me.state)) == WAITING)
            syscall(SYS_futex, &me.state, FUTEX_WAIT_PRIVATE, WAITING, NULL, NULL, 0);
        if (st == FAILED)
            err = me.err;
        *synced = me.synced;
    } else {
        /* nobody syncs: lead one ourselves (a lone writer never waits for another thread) */
        self->syncing = 1;
        long long goal = 0;
        while (self->synced < target && !err)
            err = sync_once(self, &goal);
        *synced = self->synced;
        waiter *done = err ? take_upto(self, goal, err) : take_covered(self);
        pthread_mutex_unlock(&self->mu);
        wake(done, err ? FAILED : DONE);
        pthread_mutex_lock(&self->mu);
        if (self->queue && hand_over(self) != 0)
            drain(self);  /* no thread to be had: sync for the queued writers ourselves */
        if (!self->thread_busy)
            self->syncing = 0;
        pthread_mutex_unlock(&self->mu);
    }
    return err;
}

static int commit_wait(GroupCommit *self, long long target) {
    long long synced;
    return commit_wait_synced(self, target, &synced);
}

/* wait(target): return once the first `target` bytes are durable; OSError if the sync that
 * should have covered them failed. */
static PyObject *gc_wait(GroupCommit *self, PyObject *arg) {
    long long target = PyLong_AsLongLong(arg);
    if (target == -1 && PyErr_Occurred())
        return NULL;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = commit_wait(self, target);
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* Stop the sync thread (after it has synced any writer still queued); from then on a leader
 * syncs for the writers queued behind it itself (see hand_over).  Without the GIL. */
static void stop_thread(GroupCommit *self) {
    enter(self);
    int started = self->thread_started;
    self->stopping = 1;
    self->thread_started = 0;
    pthread_cond_signal(&self->work_cv);
    pthread_mutex_unlock(&self->mu);
    if (started)
        pthread_join(self->thread, NULL);
}

/* close(): stop the sync thread; waits still served (each leader syncing for its queue). */
static PyObject *gc_close(GroupCommit *self, PyObject *unused) {
    Py_BEGIN_ALLOW_THREADS
    stop_thread(self);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* idle(fd): return once no sync of `fd` is in flight (before the fd is closed). */
static PyObject *gc_idle(GroupCommit *self, PyObject *arg) {
    int fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    enter(self);
    self->idle_waiters++;
    while (self->sync_fd == fd)
        pthread_cond_wait(&self->idle_cv, &self->mu);
    self->idle_waiters--;
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *gc_stats(GroupCommit *self, PyObject *unused) {
    enter(self);
    PyObject *out = Py_BuildValue(
        "{sLsLsLsLsLsLsL}", "syncs", self->syncs, "sync_requests", self->requests,
        "syncs_by_thread", self->thread_syncs,
        "synced", self->synced, "synced_writes", self->synced_writes,
        "group_commit_max_batch", self->max_batch, "written", self->written);
    pthread_mutex_unlock(&self->mu);
    return out;
}

static PyMethodDef gc_methods[] = {
    {"appended", (PyCFunction)(void (*)(void))gc_appended, METH_FASTCALL,
     "appended(fd, written, nwrites): the log now ends at `written` bytes, in segment fd"},
    {"covered", (PyCFunction)gc_covered, METH_VARARGS,
     "covered(written, nwrites): bytes up to `written` were made durable by other means"},
    {"wait", (PyCFunction)gc_wait, METH_O,
     "wait(target): block (GIL released) until `target` bytes are durable; leads a sync if none runs"},
    {"close", (PyCFunction)gc_close, METH_NOARGS, "close(): stop the sync thread"},
    {"idle", (PyCFunction)gc_idle, METH_O, "idle(fd): block until no sync of fd is in flight"},
    {"stats", (PyCFunction)gc_stats, METH_NOARGS, "counters: syncs, requests, batch sizes"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GroupCommitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "backends.indexed_fs._commit.GroupCommit",
    .tp_doc = "Group commit of one store's appends: one fdatasync shared by concurrent writers.",
    .tp_basicsize = sizeof(GroupCommit),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)gc_init,
    .tp_dealloc = (destructor)gc_dealloc,
    .tp_methods = gc_methods,
};

/* pwrite_all(fd, data, offset): write all of `data` at `offset`, holding the GIL (see top). */
static PyObject *pwrite_all(PyObject *mod, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "pwrite_all(fd, data, offset)");
        return NULL;
    }
    int fd = PyLong_AsLong(args[0]);
    long long off = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(args[1], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *p = buf.buf;
    Py_ssize_t left = buf.len;
    while (left > 0) {
        ssize_t w = pwrite(fd, p, (size_t)left, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            PyBuffer_Release(&buf);
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        p += w;
        off += w;
        left -= w;
    }
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------- the put path
 * Putter(store, commit).put(key, value, wait): one put of an indexed_fs store in one call, the
 * store's reference path (IndexedFSBackend._put, segment.encode, Segment.append, Index.set)
 * done in C where it is the plain case, byte for byte the same on disk and in the index:
 *
 *   1. the store's lock is taken (its own threading.Lock: a contended acquire releases the
 *      GIL while it blocks), the active segment's end and the store's counters are read;
 *   2. the record is encoded, its CRC computed and it is written with one pwrite;
 *   3. the segment's end, the store's counters, the keydir (an overwrite of a key written
 *      since the open is one dict store and the per-segment accounting in C; any other key
 *      goes through Index.set), the committer's tail; the lock is released;
 *   4. with the GIL released, the group-commit wait (commit_wait, as wait() does).
 *
 * Steps 1-3 hold the GIL, for the reason pwrite_all() holds it: they are a few microseconds of
 * CPU (most of it the kernel's copy into the page cache), and a release in the middle would
 * cost a GIL hand-off per put, taken while the store's lock is held: every other writer queues
 * on that lock behind a thread that waits for the GIL.  The keydir is a Python dict (ordered
 * by a SortedDict): its insert needs the GIL in any case.  So a put releases the GIL once, for
 * the part that blocks (the wait), as a bare C writer of the ceiling blocks once per record.
 *
 * It declines (nothing done) whenever the put needs Python's control: None for the records
 * (a key the format refuses, a value that is not bytes), False for the segment (a rotation: the
 * records do not fit; a reservation; a segment's first record, its min_seq).  The caller then
 * runs the reference path, which does all of that.  Zeros to write ahead of the append are
 * written here, as Segment.append writes them.  Python keeps every decision: it chooses
 * whether to call this at all, and whether the wait happens here (`wait`) or in Python (a fail
 * point between the append and the wait is hit in Python, where it is declared).
 *
 * Durability: the acknowledgement is the return, after commit_wait() saw `synced` >= the
 * record's end, exactly as for wait().  The returned (target, synced) is what the committer had
 * synced when it let the writer go, for the store's "ack <= synced" books.  The test hook
 * set_ack_before_sync() skips the wait: the mutation the durability tests must catch. */
static atomic_int ack_before_sync;  /* test hook: see set_ack_before_sync() */


typedef struct {
    PyObject_HEAD
    PyObject *store;
    PyObject *lock;     /* store._lock */
    PyObject *ledger;   /* store.ledger: the append is counted there, as Segment.append does */
    GroupCommit *commit;
    long long puts;     /* puts done here (not declined): the store's stats show it */
} Putter;

#define REC_HEADER 21
#define REC_MAX_KEY (1 << 16)
#define REC_MAX_VALUE (1LL << 31)
#define REC_GATHER (64 << 10)  /* a value this long is written from its buffer (GATHER_BYTES) */
#define ZERO_AHEAD (256 << 10)  /* segment.ZERO_AHEAD (a test holds them equal) */

static const uint8_t zero_block[ZERO_AHEAD];

static PyObject *s_acquire, *s_release, *s_active, *s_size, *s_zeroed, *s_file_size, *s_fd,
    *s_min_seq, *s_id, *s_segment_size, *s_reserve_pending, *s_next_seq, *s_written,
    *s_nwrites, *s_index, *s_d, *s_live, *s_set, *s_gc_pending, *s_add, *s_deltas, *s_due_at,
    *s_wake, *s_record, *s_write, *s_unmap;

static int intern_names(void) {
#define NAME(var, text) if (!(var = PyUnicode_InternFromString(text))) return -1;
    NAME(s_acquire, "acquire") NAME(s_release, "release") NAME(s_active, "_active")
    NAME(s_size, "size") NAME(s_zeroed, "zeroed") NAME(s_file_size, "file_size")
    NAME(s_fd, "fd") NAME(s_min_seq, "min_seq") NAME(s_id, "id")
    NAME(s_segment_size, "_segment_size") NAME(s_reserve_pending, "_reserve_pending")
    NAME(s_next_seq, "_next_seq") NAME(s_written, "_written") NAME(s_nwrites, "_nwrites")
    NAME(s_index, "_index") NAME(s_d, "d") NAME(s_live, "live") NAME(s_set, "set")
    NAME(s_gc_pending, "_gc_pending") NAME(s_add, "add") NAME(s_deltas, "_deltas")
    NAME(s_due_at, "due_at") NAME(s_wake, "wake") NAME(s_record, "record") NAME(s_unmap, "unmap")
    NAME(s_write, "write")
#undef NAME
    return 0;
}

static int putter_init(Putter *self, PyObject *args, PyObject *kw) {
    PyObject *store, *commit;
    if (!PyArg_ParseTuple(args, "OO!", &store, &GroupCommitType, &commit))
        return -1;
    PyObject *lock = PyObject_GetAttrString(store, "_lock");
    if (!lock)
        return -1;
    PyObject *ledger = PyObject_GetAttrString(store, "ledger");
    if (!ledger) {
        Py_DECREF(lock);
        return -1;
    }
    Py_INCREF(store);
    Py_INCREF(commit);
    Py_XSETREF(self->store, store);
    Py_XSETREF(self->lock, lock);
    Py_XSETREF(self->ledger, ledger);
    Py_XSETREF(self->commit, (GroupCommit *)commit);
    return 0;
}

static void putter_dealloc(Putter *self) {
    Py_XDECREF(self->store);
    Py_XDECREF(self->lock);
    Py_XDECREF(self->ledger);
    Py_XDECREF(self->commit);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* getattr(obj, name) as a C long long; -1 with an exception set on failure */
static int attr_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* getattr(obj, name) as an unsigned long long (a seq: up to 2**64 - 1) */
static int attr_ull(PyObject *obj, PyObject *name, unsigned long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v)
        return -1;
    *out = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    return (*out == (unsigned long long)-1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_ll(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (!v)
        return -1;
    int rc = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

/* item i of list `acc` += delta (the keydir's per-segment [entries, bytes]) */
static int list_add(PyObject *acc, Py_ssize_t i, long long delta) {
    if (!PyList_Check(acc) || PyList_GET_SIZE(acc) <= i) {
        PyErr_SetString(PyExc_TypeError, "keydir accounting: [entries, bytes] expected");
        return -1;
    }
    long long v = PyLong_AsLongLong(PyList_GET_ITEM(acc, i));
    if (v == -1 && PyErr_Occurred())
        return -1;
    PyObject *n = PyLong_FromLongLong(v + delta);
    if (!n)
        return -1;
    PyList_SetItem(acc, i, n);
    return 0;
}

/* Write all `n` bytes of iov[0..cnt) at `off`, resuming after short writes; 0 or an errno. */
static int pwritev_all(int fd, struct iovec *iov, int cnt, long long off) {
    while (cnt > 0) {
        ssize_t w = pwritev(fd, iov, cnt < IOV_MAX ? cnt : IOV_MAX, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        off += w;
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* The keydir step of a put (GIL and store lock held): Index.set(key, entry) for the record of
 * `nbytes` bytes at (sid, off), and the gc rule of _append_locked (a sealed segment whose
 * last live entry this supersedes is queued for GC).  An overwrite of a key in the overlay is
 * done here, as Index.set does it: one dict store (the key is in the sorted order already)
 * and the accounting; any other key goes through Index.set itself. */
static int index_insert(PyObject *store, PyObject *key, long long sid, long long off,
                        long long nbytes, long long seq) {
    int rc = -1;
    PyObject *index = NULL, *d = NULL, *live = NULL, *entry = NULL, *old = NULL;
    if (!(index = PyObject_GetAttr(store, s_index)) || !(d = PyObject_GetAttr(index, s_d)) ||
        !(live = PyObject_GetAttr(index, s_live)))
        goto out;
    if (!PyDict_Check(d) || !PyDict_Check(live)) {
        PyErr_SetString(PyExc_TypeError, "the keydir's overlay and accounting are dicts");
        goto out;
    }
    entry = Py_BuildValue("(LLLL)", sid, off, nbytes, seq);
    if (!entry)
        goto out;
    old = PyDict_GetItemWithError(d, key);
    if (old && PyTuple_CheckExact(old) && PyTuple_GET_SIZE(old) == 4) {
        Py_INCREF(old);
        if (PyDict_SetItem(d, key, entry) < 0)
            goto out;
        PyObject *acc = PyDict_GetItemWithError(live, PyTuple_GET_ITEM(old, 0));
        long long old_size = PyLong_AsLongLong(PyTuple_GET_ITEM(old, 2));
        if (!acc || (old_size == -1 && PyErr_Occurred()) || list_add(acc, 0, -1) < 0 ||
            list_add(acc, 1, -old_size) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "keydir accounting: segment missing");
            goto out;
        }
        PyObject *sidobj = PyTuple_GET_ITEM(entry, 0);
        PyObject *accn = PyDict_GetItemWithError(live, sidobj);
        if (accn) {
            if (list_add(accn, 0, 1) < 0 || list_add(accn, 1, nbytes) < 0)
                goto out;
        } else {
            if (PyErr_Occurred())
                goto out;
            PyObject *fresh = Py_BuildValue("[LL]", 1LL, nbytes);
            if (!fresh || PyDict_SetItem(live, sidobj, fresh) < 0) {
                Py_XDECREF(fresh);
                goto out;
            }
            Py_DECREF(fresh);
        }
    } else {
        if (!old && PyErr_Occurred())
            goto out;
        old = PyObject_CallMethodObjArgs(index, s_set, key, entry, NULL);
        if (!old)
            goto out;
    }
    if (old != Py_None) {  /* _append_locked: a segment left without live entries is GC's */
        PyObject *old_sid = PyTuple_GET_ITEM(old, 0);
        int same = PyObject_RichCompareBool(old_sid, PyTuple_GET_ITEM(entry, 0), Py_EQ);
        if (same < 0)
            goto out;
        if (!same) {
            PyObject *acc = PyDict_GetItemWithError(live, old_sid);
            if (!acc)
                goto out;
            long long left = PyLong_AsLongLong(PyList_GET_ITEM(acc, 0));
            if (left == -1 && PyErr_Occurred())
                goto out;
            if (left == 0) {
                PyObject *pending = PyObject_GetAttr(store, s_gc_pending);
                PyObject *r = pending ? PyObject_CallMethodObjArgs(pending, s_add, old_sid, NULL)
                                      : NULL;
                Py_XDECREF(pending);
                if (!r)
                    goto out;
                Py_DECREF(r);
            }
        }
    }
    rc = 0;
out:
    Py_XDECREF(index);
    Py_XDECREF(d);
    Py_XDECREF(live);
    Py_XDECREF(entry);
    Py_XDECREF(old);
    return rc;
}

/* One record of a put or a batch, as taken from its arguments. */
typedef struct {
    PyObject *key;
    const char *kb;
    Py_ssize_t klen;
    Py_buffer v;       /* the value: bytes, or a flat byte view (Backend.put_many's buffers) */
} rec_in;

/* Take `count` (key, value) pairs: 1 when each is one the format takes (its value's buffer
 * then held in recs[i].v), 0 to decline (nothing held), -1 on an error. */
static int take_records(PyObject *const *keys, PyObject *const *values, Py_ssize_t count,
                        rec_in *recs, long long *total) {
    *total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        rec_in *r = &recs[i];
        r->key = keys[i];
        r->kb = PyUnicode_CheckExact(keys[i]) ? PyUnicode_AsUTF8AndSize(keys[i], &r->klen) : NULL;
        if (!r->kb || r->klen < 1 || r->klen > REC_MAX_KEY ||
            PyObject_GetBuffer(values[i], &r->v, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();  /* no utf-8 form, a key too long, not bytes: the reference path says so */
            while (i-- > 0)
                PyBuffer_Release(&recs[i].v);
            return 0;
        }
        if (r->v.len > REC_MAX_VALUE) {
            for (Py_ssize_t j = 0; j <= i; j++)
                PyBuffer_Release(&recs[j].v);
            return 0;
        }
        *total += REC_HEADER + (long long)r->klen + (long long)r->v.len;
    }
    return 1;
}

/* Encode recs[0..count) with seqs from `seq` and write them at `off` with one pwrite (one
 * pwritev: values of REC_GATHER bytes or more are written from their own buffers, the rest
 * copied after their headers); 0 or an errno.  Needs no Python: the GIL may be released. */
static int write_records(int fd, rec_in *recs, Py_ssize_t count, long long seq, long long off) {
    size_t copied = 0;
    int niov = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        copied += REC_HEADER + (size_t)recs[i].klen +
                  (recs[i].v.len < REC_GATHER ? (size_t)recs[i].v.len : 0);
    uint8_t stackbuf[4096], *buf = copied <= sizeof stackbuf ? stackbuf : malloc(copied);
    struct iovec one[3], *iov = count == 1 ? one : malloc(sizeof *iov * (size_t)(2 * count + 1));
    int err = 0;
    if (!buf || !iov) {
        err = ENOMEM;
        goto out;
    }
    uint8_t *p = buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        rec_in *r = &recs[i];
        const uint8_t *vb = r->v.buf;
        size_t vlen = (size_t)r->v.len, klen = (size_t)r->klen;
        unsigned long long sq = (unsigned long long)(seq + i);
        uint8_t *head = p;
        for (int j = 0; j < 8; j++)
            head[4 + j] = (uint8_t)(sq >> (8 * j));
        for (int j = 0; j < 4; j++) {
            head[12 + j] = (uint8_t)(klen >> (8 * j));
            head[16 + j] = (uint8_t)(vlen >> (8 * j));
        }
        head[20] = 0;  /* flags: a value, not a tombstone */
        memcpy(head + REC_HEADER, r->kb, klen);
        uint32_t c = crc32c_extend(crc32c_extend(0, head + 4, REC_HEADER - 4 + klen), vb, vlen);
        for (int j = 0; j < 4; j++)
            head[j] = (uint8_t)(c >> (8 * j));
        p += REC_HEADER + klen;
        int gather = vlen >= REC_GATHER;
        if (!gather) {
            memcpy(p, vb, vlen);
            p += vlen;
        }
        /* the copied bytes since the last gathered value are one iovec */
        if (niov && (uint8_t *)iov[niov - 1].iov_base + iov[niov - 1].iov_len == head)
            iov[niov - 1].iov_len += (size_t)(p - head);
        else
            iov[niov++] = (struct iovec){head, (size_t)(p - head)};
        if (gather)
            iov[niov++] = (struct iovec){(void *)vb, vlen};
    }
    err = pwritev_all(fd, iov, niov, off);
    if (err)  /* no partial record stays behind (Segment.append) */
        (void)!ftruncate(fd, (off_t)off);
out:
    if (buf != stackbuf)
        free(buf);
    if (iov != one)
        free(iov);
    return err;
}

/* Segment._zero_ahead for an append ending at `end` (store lock and GIL held): zeros from
 * `*zeroed` past `end`, ZERO_AHEAD at least, within the reserved space (`file_size`); each
 * write counted in the ledger as Python counts it.  0, an errno (the caller cuts the file back),
 * or -1 with a Python exception (the ledger's). */
static int zero_ahead(PyObject *ledger, int fd, long long end, long long *zeroed, long long file_size) {
    long long start = end - *zeroed <= ZERO_AHEAD ? *zeroed : end;
    long long stop = end > start + ZERO_AHEAD ? end : start + ZERO_AHEAD;
    if (stop > file_size)
        stop = file_size;
    while (start < stop) {
        long long k = stop - start < ZERO_AHEAD ? stop - start : ZERO_AHEAD;
        PyObject *kobj = PyLong_FromLongLong(k), *r;
        r = kobj ? PyObject_CallMethodObjArgs(ledger, s_record, s_write, kobj, NULL) : NULL;
        Py_XDECREF(kobj);
        if (!r)
            return -1;
        Py_DECREF(r);
        struct iovec iov = {(void *)zero_block, (size_t)k};
        int err = pwritev_all(fd, &iov, 1, start);
        if (err)
            return err;
        start += k;
    }
    *zeroed = stop;
    return 0;
}

/* The put path for `count` records (see the top of this section): (target, synced), or
 * False / None when declined. */
static PyObject *put_records(Putter *self, PyObject *const *keys, PyObject *const *values,
                             Py_ssize_t count, int wait) {
    rec_in one[1], *recs = count == 1 ? one : PyMem_Malloc(sizeof *recs * (size_t)count);
    if (!recs)
        return PyErr_NoMemory();
    long long n;
    int took = take_records(keys, values, count, recs, &n);
    if (took <= 0) {
        if (recs != one)
            PyMem_Free(recs);
        if (took < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *store = self->store, *seg = NULL, *out = NULL, *r;
    long long fd = 0, size = 0, zeroed = 0, file_size = 0, seg_size = 0, seq = 0, written = 0,
              nwrites = 0, sid = 0, due = 0;
    unsigned long long min_seq = 0;
    int pending = 0, err = 0;
    if (!(r = PyObject_CallMethodNoArgs(self->lock, s_acquire)))
        goto released;
    Py_DECREF(r);
    if (!(seg = PyObject_GetAttr(store, s_active)) || attr_ll(seg, s_fd, &fd) < 0 ||
        attr_ll(seg, s_size, &size) < 0 || attr_ll(seg, s_zeroed, &zeroed) < 0 ||
        attr_ll(seg, s_file_size, &file_size) < 0 || attr_ull(seg, s_min_seq, &min_seq) < 0 ||
        attr_ll(seg, s_id, &sid) < 0 || attr_ll(store, s_segment_size, &seg_size) < 0 ||
        attr_ll(store, s_next_seq, &seq) < 0 || attr_ll(store, s_written, &written) < 0 ||
        attr_ll(store, s_nwrites, &nwrites) < 0)
        goto unlock;
    {
        PyObject *rp = PyObject_GetAttr(store, s_reserve_pending);
        if (!rp)
            goto unlock;
        pending = PyObject_IsTrue(rp);
        Py_DECREF(rp);
        if (pending < 0)
            goto unlock;
    }
    long long end = size + n;
    if (pending || size == 0 || end > seg_size || min_seq > (unsigned long long)seq) {
        out = Py_False;  /* the segment needs Python: rotation, reservation, first record */
        Py_INCREF(out);
        goto unlock;
    }
    if (end > zeroed && zeroed < file_size) {  /* zeros ahead first, as Segment.append */
        err = zero_ahead(self->ledger, (int)fd, end, &zeroed, file_size);
        if (err < 0)
            goto unlock;
        if (err > 0)  /* no zeros half-written past the records: cut back, as write_records */
            (void)!ftruncate((int)fd, (off_t)size);
        else if (set_ll(seg, s_zeroed, zeroed) < 0)
            goto unlock;
    }
    if (!err) {   /* counted before the write, as Segment.append counts it */
        PyObject *nobj = PyLong_FromLongLong(n);
        r = nobj ? PyObject_CallMethodObjArgs(self->ledger, s_record, s_write, nobj, NULL) : NULL;
        Py_XDECREF(nobj);
        if (!r)
            goto unlock;
        Py_DECREF(r);
    }
    if (!err)
        err = write_records((int)fd, recs, count, seq, size);
    if (err) {  /* the file is cut back to `size`: its mapping goes too (Segment.unmap) */
        if ((r = PyObject_CallMethodNoArgs(seg, s_unmap)) != NULL)
            Py_DECREF(r);
        if (r && set_ll(seg, s_file_size, size) == 0 && set_ll(seg, s_zeroed, size) == 0) {
            errno = err;
            PyErr_SetFromErrno(PyExc_OSError);
        }
        goto unlock;
    }
    if (set_ll(seg, s_size, end) < 0 || (end > zeroed && set_ll(seg, s_zeroed, end) < 0) ||
        (end > file_size && set_ll(seg, s_file_size, end) < 0))
        goto unlock;
    for (Py_ssize_t i = 0, off = size; i < count; i++) {
        long long rn = REC_HEADER + (long long)recs[i].klen + (long long)recs[i].v.len;
        if (index_insert(store, recs[i].key, sid, off, rn, seq + i) < 0)
            goto unlock;
        off += rn;
    }
    if (set_ll(store, s_written, written + n) < 0 ||
        set_ll(store, s_nwrites, nwrites + count) < 0 ||
        set_ll(store, s_next_seq, seq + count) < 0)
        goto unlock;
    {
        PyObject *deltas = PyObject_GetAttr(store, s_deltas);
        if (!deltas || attr_ll(deltas, s_due_at, &due) < 0) {
            Py_XDECREF(deltas);
            goto unlock;
        }
        r = nwrites + count >= due ? PyObject_CallMethodNoArgs(deltas, s_wake)
                                   : Py_NewRef(Py_None);
        Py_DECREF(deltas);
        if (!r)
            goto unlock;
        Py_DECREF(r);
    }
    GroupCommit *gc = self->commit;
    enter(gc);
    gc->tail_fd = (int)fd;
    gc->written = written + n;
    gc->nwrites = nwrites + count;
    pthread_mutex_unlock(&gc->mu);
    self->puts += count;
    out = Py_True;  /* appended: the wait below (outside the lock), or the caller's */
unlock:
    Py_XDECREF(seg);
    {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        r = PyObject_CallMethodNoArgs(self->lock, s_release);
        if (!r) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            Py_CLEAR(out);
        } else {
            Py_DECREF(r);
            PyErr_Restore(et, ev, tb);
        }
    }
released:
    for (Py_ssize_t i = 0; i < count; i++)
        PyBuffer_Release(&recs[i].v);
    if (recs != one)
        PyMem_Free(recs);
    if (out != Py_True)
        return out;  /* False or None (declined), or NULL with the exception */
    long long target = written + n, synced = 0;
    if (wait) {
        GroupCommit *gc = self->commit;
        Py_BEGIN_ALLOW_THREADS
        if (!atomic_load_explicit(&ack_before_sync, memory_order_relaxed)) {
            err = commit_wait_synced(gc, target, &synced);
        } else {  /* the mutation: no wait; the books get what was synced at the ack */
            enter(gc);
            synced = gc->synced;
            pthread_mutex_unlock(&gc->mu);
        }
        Py_END_ALLOW_THREADS
        if (err) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
    }
    return Py_BuildValue("(LL)", target, synced);
}

/* put(key, value, wait) -> (target, synced) | False | None: one record (see the top of this
 * section).  `wait` false: no wait (the caller waits for `target`); synced is then 0. */
static PyObject *putter_put(Putter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "put(key, value, wait)");
        return NULL;
    }
    int wait = PyObject_IsTrue(args[2]);
    if (wait < 0)
        return NULL;
    return put_records(self, &args[0], &args[1], 1, wait);
}

/* put_many(items, wait) -> (target, synced) | False | None: a list of (key, value) pairs as one
 * append of their records, in order, and one wait: a batch costs one pwrite and one sync. */
static PyObject *putter_put_many(Putter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "put_many(items: list, wait)");
        return NULL;
    }
    int wait = PyObject_IsTrue(args[1]);
    if (wait < 0)
        return NULL;
    PyObject *items = args[0];
    Py_ssize_t count = PyList_GET_SIZE(items);
    if (count == 0)
        Py_RETURN_NONE;
    PyObject **kv = PyMem_Malloc(sizeof *kv * (size_t)(2 * count));
    if (!kv)
        return PyErr_NoMemory();
    PyObject *out = Py_None;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(it) || PyTuple_GET_SIZE(it) != 2)
            goto done;  /* not pairs: declined */
        kv[i] = PyTuple_GET_ITEM(it, 0);
        kv[count + i] = PyTuple_GET_ITEM(it, 1);
    }
    out = NULL;
    Py_INCREF(items);  /* the pairs (and so kv's borrowed items) outlive the call */
    out = put_records(self, kv, kv + count, count, wait);
    Py_DECREF(items);
    PyMem_Free(kv);
    return out;
done:
    PyMem_Free(kv);
    Py_RETURN_NONE;
}

static PyMethodDef putter_methods[] = {
    {"put", (PyCFunction)(void (*)(void))putter_put, METH_FASTCALL,
     "put(key, value, wait) -> (target, synced) | False | None: one put of the store in C (see _commit.c)"},
    {"put_many", (PyCFunction)(void (*)(void))putter_put_many, METH_FASTCALL,
     "put_many(items, wait) -> (target, synced) | False | None: a batch, one pwrite and one wait"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef putter_members[] = {
    {"puts", T_LONGLONG, offsetof(Putter, puts), READONLY, "puts done in C (not declined)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject PutterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "backends.indexed_fs._commit.Putter",
    .tp_doc = "Putter(store, commit): an indexed_fs store's put path in one C call.",
    .tp_basicsize = sizeof(Putter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)putter_init,
    .tp_dealloc = (destructor)putter_dealloc,
    .tp_methods = putter_methods,
    .tp_members = putter_members,
};

/* set_ack_before_sync(flag) -> previous: the mutation the durability tests must catch.  On,
 * Putter.put acknowledges without waiting for the sync.  Nothing but a test may set it. */
static PyObject *set_ack_before_sync(PyObject *mod, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    return PyBool_FromLong(atomic_exchange(&ack_before_sync, on));
}

/* ---------------------------------------------------------------------------- bare_threads
 * The ceiling for --baseline: `threads` pthreads appending `record`-byte records to one
 * pre-zeroed file and sharing fdatasyncs through this same committer, with no Python (and no
 * GIL) in the loop.  What the store reaches at N threads, over what this reaches, is the share
 * of the machine's group-commit throughput that a Python store keeps. */
typedef struct {
    GroupCommit *gc;
    pthread_mutex_t *append_mu;  /* held across the append and appended(), as the store does */
    long long *end;
    int fd, record;
    long long count;
    int err;
} bare_writer_arg;

static void *bare_writer(void *p) {
    bare_writer_arg *a = p;
    char *buf = malloc((size_t)a->record);
    if (!buf) {
        a->err = ENOMEM;
        return NULL;
    }
    memset(buf, 'v', (size_t)a->record);
    for (long long i = 0; i < a->count && !a->err; i++) {
        pthread_mutex_lock(a->append_mu);
        long long off = *a->end;
        if (pwrite(a->fd, buf, (size_t)a->record, (off_t)off) != a->record) {
            a->err = errno ? errno : EIO;
            pthread_mutex_unlock(a->append_mu);
            break;
        }
        *a->end = off + a->record;
        pthread_mutex_lock(&a->gc->mu);
        a->gc->written = off + a->record;
        a->gc->nwrites++;
        pthread_mutex_unlock(&a->gc->mu);
        pthread_mutex_unlock(a->append_mu);
        a->err = commit_wait(a->gc, off + a->record);
    }
    free(buf);
    return NULL;
}

/* bare_threads(path, threads, operations, record) -> (seconds, syncs) */
static PyObject *bare_threads(PyObject *mod, PyObject *args) {
    const char *path;
    int threads, record;
    long long operations;
    if (!PyArg_ParseTuple(args, "siLi", &path, &threads, &operations, &record))
        return NULL;
    if (threads < 1 || threads > 1024 || record < 1 || operations < 1) {
        PyErr_SetString(PyExc_ValueError, "bare_threads: threads 1..1024, operations and record >= 1");
        return NULL;
    }
    GroupCommit gc;
    pthread_mutex_t append_mu = PTHREAD_MUTEX_INITIALIZER;
    bare_writer_arg *a = calloc((size_t)threads, sizeof *a);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    int err = 0, fd = -1, started = 0;
    double seconds = 0;
    long long end = 0;
    Py_BEGIN_ALLOW_THREADS
    if (!a || !tid) {
        err = ENOMEM;
        goto out;
    }
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        err = errno;
        goto out;
    }
    {   /* written zeros ahead of the appends (the store's appends run into such zeros too) */
        static const char zeros[1 << 16];
        long long size = operations * record;
        for (long long o = 0; o < size && !err; o += sizeof zeros)
            if (pwrite(fd, zeros, sizeof zeros, (off_t)o) != (ssize_t)sizeof zeros)
                err = errno ? errno : EIO;
        if (!err && fsync(fd) != 0)
            err = errno;
    }
    if (err)
        goto out;
    commit_setup(&gc, fd, 0, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < threads; i++) {
        a[i] = (bare_writer_arg){.gc = &gc, .append_mu = &append_mu, .end = &end, .fd = fd,
                                 .record = record,
                                 .count = operations / threads + (i < operations % threads)};
        if (pthread_create(&tid[i], NULL, bare_writer, &a[i]) != 0) {
            err = EAGAIN;
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        if (a[i].err && !err)
            err = a[i].err;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    commit_teardown(&gc);
out:
    if (fd >= 0)
        close(fd);
    Py_END_ALLOW_THREADS
    long long syncs = started ? gc.syncs : 0;
    free(a);
    free(tid);
    if (err) {
        errno = err;
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    }
    return Py_BuildValue("dL", seconds, syncs);
}

/* set_sync_delay(us): the test hook above; returns the previous delay. */
static PyObject *set_sync_delay(PyObject *mod, PyObject *arg) {
    long long us = PyLong_AsLongLong(arg);
    if (us == -1 && PyErr_Occurred())
        return NULL;
    if (us < 0) {
        PyErr_SetString(PyExc_ValueError, "set_sync_delay: microseconds >= 0");
        return NULL;
    }
    return PyLong_FromLongLong(atomic_exchange(&sync_delay_us, us));
}

static PyMethodDef module_methods[] = {
    {"set_sync_delay", set_sync_delay, METH_O,
     "set_sync_delay(us) -> previous: sleep us microseconds before every fdatasync (tests)"},
    {"bare_threads", bare_threads, METH_VARARGS,
     "bare_threads(path, threads, operations, record) -> (seconds, syncs): the C ceiling of --baseline"},
    {"set_ack_before_sync", set_ack_before_sync, METH_O,
     "set_ack_before_sync(flag) -> previous: Putter.put acknowledges before the sync (tests)"},
    {"pwrite_all", (PyCFunction)(void (*)(void))pwrite_all, METH_FASTCALL,
     "pwrite_all(fd, data, offset): write all of data at offset without releasing the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_commit",
    "Group commit of local segment appends outside the GIL (see _commit.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__commit(void) {
    if (PyType_Ready(&GroupCommitType) < 0 || PyType_Ready(&PutterType) < 0 ||
        intern_names() < 0)
        return NULL;
    crc_init();
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, after_fork_in_child) == 0)
        atfork_done = 1;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&GroupCommitType);
    if (PyModule_AddObject(m, "GroupCommit", (PyObject *)&GroupCommitType) < 0) {
        Py_DECREF(&GroupCommitType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "ZERO_AHEAD", ZERO_AHEAD) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&PutterType);
    if (PyModule_AddObject(m, "Putter", (PyObject *)&PutterType) < 0) {
        Py_DECREF(&PutterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
