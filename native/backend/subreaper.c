/*
 * subreaper(): the launcher becomes the command's child subreaper (PR_SET_CHILD_SUBREAPER),
 * from before the command starts, in both modes: a process of the command whose parent
 * ends (a daemon that double-forks, a `( cmd & )`) is re-parented to the launcher, not to
 * init, so that "a process of the command" is what its chain of parents says for as long
 * as it lives (native/server/peers.c, in_command), and the launcher can wait for it.
 * admit_member(pid): a process the launcher started that is not below it (the supervisor,
 * which detaches) is served as a process of the command.
 * In C: ctypes cost the launcher 5-25 ms to import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <sys/prctl.h>

PyObject *ldp_subreaper(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

int peers_admit_member(pid_t pid);     /* server/peers.c */

PyObject *ldp_admit_member(PyObject *self, PyObject *arg)
{
    (void)self;
    long pid = PyLong_AsLong(arg);
    if (pid == -1 && PyErr_Occurred())
        return NULL;
    if (pid <= 1 || peers_admit_member((pid_t)pid) < 0) {
        errno = ESRCH;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}
