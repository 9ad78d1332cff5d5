/* Group commit for local segments, outside the GIL.
 *
 * Why C: with 16 writer threads the pure-Python group commit spends its time handing the GIL
 * around, not waiting for the disk.  A durable put there released and re-took the GIL three or
 * four times (the pwrite, the commit lock, the wait, the wake-up), each a thread hand-off.  This
 * module brings that down to one release per put (16 threads: 2.4x -> ~4.5x one thread's
 * throughput on the 2-core VM of the README; what is left is CPython's own GIL hand-off):
 *
 *   - pwrite_all() appends a record while *holding* the GIL.  It is a page-cache copy of ~1 KiB
 *     (a few us); releasing the GIL around it only invites another thread to take over
 *     mid-append.
 *   - GroupCommit.wait(target) releases the GIL once and sleeps (on a futex of its own) until
 *     the first `target` bytes appended are durable.  The first waiter that finds no sync
 *     running becomes the leader: it fdatasyncs everything appended so far (its own bytes and
 *     those of every writer that queued meanwhile), wakes the writers that sync covered and
 *     makes the first one still queued the next leader.  A lone writer syncs itself, with no
 *     thread hand-off at all (the 1-thread case stays as fast as a bare loop).
 *
 * The store tells the committer where the log ends after every append (appended()) and when a
 * segment was sealed durably (covered()); "bytes" are a store-wide clock, so a sync of the
 * active segment's fd covers everything appended before it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
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
    atomic_int state;          /* WAITING, DONE (bytes durable) or LEAD (run the next sync) */
    struct waiter *next;
} waiter;

enum { WAITING, DONE, LEAD };

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
    long long syncs, requests, max_batch;
} GroupCommit;

static int gc_init(GroupCommit *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"fd", "written", "nwrites", NULL};
    int fd;
    long long written = 0, nwrites = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|LL", names, &fd, &written, &nwrites))
        return -1;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->idle_cv, NULL);
    self->queue = NULL;
    self->idle_waiters = 0;
    self->tail_fd = fd;
    self->written = self->synced = written;
    self->nwrites = self->synced_writes = nwrites;
    self->syncing = 0;
    self->sync_fd = -1;
    self->syncs = self->requests = self->max_batch = 0;
    return 0;
}

static void gc_dealloc(GroupCommit *self) {
    pthread_cond_destroy(&self->idle_cv);
    pthread_mutex_destroy(&self->mu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Unlink the queued writers whose bytes are durable now, as a list to wake (caller holds mu). */
static waiter *take_covered(GroupCommit *self) {
    waiter *out = NULL, **pp = &self->queue;
    while (*pp) {
        waiter *w = *pp;
        if (w->target <= self->synced) {
            *pp = w->next;
            w->next = out;
            out = w;
        } else {
            pp = &w->next;
        }
    }
    return out;
}

/* The leader is done: unlink the first writer still queued to lead the next sync, or end the
 * leadership if nobody waits (caller holds mu). */
static waiter *take_next_leader(GroupCommit *self) {
    waiter *w = self->queue;
    if (w)
        self->queue = w->next;
    else
        self->syncing = 0;
    return w;
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
    pthread_mutex_lock(&self->mu);
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
    pthread_mutex_lock(&self->mu);
    if (written > self->synced) {
        self->synced = written;
        self->synced_writes = nwrites;
    }
    waiter *done = take_covered(self);
    pthread_mutex_unlock(&self->mu);
    wake(done, DONE);
    Py_RETURN_NONE;
}

/* wait(target): return once the first `target` bytes are durable; OSError if this writer's
 * sync failed (the writers queued behind it then lead a sync of their own, and report theirs). */
static PyObject *gc_wait(GroupCommit *self, PyObject *arg) {
    long long target = PyLong_AsLongLong(arg);
    if (target == -1 && PyErr_Occurred())
        return NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    self->requests++;
    int lead = 0;
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
        if (st == LEAD) {
            lead = 1;
            pthread_mutex_lock(&self->mu);
        }
    } else {
        self->syncing = 1;
        lead = 1;
    }
    if (lead) {
        /* mu held */
        while (self->synced < target) {
            int fd = self->tail_fd;
            long long goal = self->written, nw = self->nwrites;
            self->sync_fd = fd;
            pthread_mutex_unlock(&self->mu);
            int rc = fdatasync(fd);
            int e = errno;
            pthread_mutex_lock(&self->mu);
            self->sync_fd = -1;
            if (self->idle_waiters)
                pthread_cond_broadcast(&self->idle_cv);
            if (rc != 0) {
                err = e;
                break;
            }
            if (goal > self->synced) {
                long long batch = nw - self->synced_writes;
                if (batch > self->max_batch)
                    self->max_batch = batch;
                self->synced = goal;
                self->synced_writes = nw;
                self->syncs++;
            }
            if (self->synced < target) {  /* rare: our bytes came after the goal; go again */
                waiter *done = take_covered(self);
                pthread_mutex_unlock(&self->mu);
                wake(done, DONE);
                pthread_mutex_lock(&self->mu);
            }
        }
        waiter *done = take_covered(self);
        waiter *next = take_next_leader(self);
        pthread_mutex_unlock(&self->mu);
        wake(done, DONE);
        if (next) {
            next->next = NULL;
            wake(next, LEAD);
        }
    }
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* idle(fd): return once no sync of `fd` is in flight (before the fd is closed). */
static PyObject *gc_idle(GroupCommit *self, PyObject *arg) {
    int fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    self->idle_waiters++;
    while (self->sync_fd == fd)
        pthread_cond_wait(&self->idle_cv, &self->mu);
    self->idle_waiters--;
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *gc_stats(GroupCommit *self, PyObject *unused) {
    pthread_mutex_lock(&self->mu);
    PyObject *out = Py_BuildValue(
        "{sLsLsLsLsLsL}", "syncs", self->syncs, "sync_requests", self->requests,
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

static PyMethodDef module_methods[] = {
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
