/*
 * subreaper(): the launcher becomes the command's child subreaper (PR_SET_CHILD_SUBREAPER),
 * from before the command starts, in both modes: a process of the command whose parent
 * ends (a daemon that double-forks, a `( cmd & )`) is re-parented to the launcher, not to
 * init, so that "a process of the command" is what its chain of parents says for as long
 * as it lives (native/server/peers.c, in_command), and the launcher can wait for it.
 * In C: ctypes cost the launcher 5-25 ms to import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/prctl.h>

PyObject *ldp_subreaper(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}
