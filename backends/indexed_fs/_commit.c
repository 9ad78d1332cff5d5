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
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <time.h>
#include <string.h>
#include <stdlib.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A writer waiting for a sync; lives on its own stack for the length of the wait.  It sleeps on
 * a futex of its own `state`, which whoever wakes it sets *after* unlinking it under `mu` and
 * releasing `mu`: the woken writer never has to take `mu` again (with a condition variable it
 * would, while the leader still holds it to wake the others: one more sleep per put). */
typedef struct waiter {
    long long target;
    atomic_int state;          /* WAITING, DONE (bytes durable) or FAILED (see err) */
    int err;                   /* errno of the failed sync that covered this writer */
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
 * Called without the GIL. */
static int commit_wait(GroupCommit *self, long long target) {
    int err = 0;
    enter(self);
    self->requests++;
    if (self->synced >= target) {
        /* durable already (a sync that started after our append covered it) */
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
    } else {
        /* nobody syncs: lead one ourselves (a lone writer never waits for another thread) */
        self->syncing = 1;
        long long goal = 0;
        while (self->synced < target && !err)
            err = sync_once(self, &goal);
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
    {"pwrite_all", (PyCFunction)(void (*)(void))pwrite_all, METH_FASTCALL,
     "pwrite_all(fd, data, offset): write all of data at offset without releasing the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_commit",
    "Group commit of local segment appends outside the GIL (see _commit.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__commit(void) {
    if (PyType_Ready(&GroupCommitType) < 0)
        return NULL;
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
    return m;
}
