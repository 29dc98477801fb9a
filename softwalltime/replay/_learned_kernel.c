/* The two hot loops of learned's table (softwalltime/core/learned.py), in C.
 *
 * softwalltime.replay.learned_native.NativeLearner calls them in place of
 * Learner._add and Learner._best when `make compile` has built this module; the Python
 * methods stay the reference. Every float is the one Python computes: the same IEEE
 * double operations in the same order (int / int and int x float convert each int to a
 * double first, as CPython does for ints below 2**53), built with -ffp-contract=off so
 * that no multiply-add is fused. tests/test_learned_native.py checks both give the same
 * table and the same choices on real traces.
 *
 * The table's sums stay Python lists of floats (the Learner's own state): these
 * functions read and replace their items; they allocate no list.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_RULES 64

/* The list's n items as doubles (floats or ints); -1 with an exception set otherwise. */
static int
read_list(PyObject *list, Py_ssize_t n, double *out)
{
    if (!PyList_CheckExact(list) || PyList_GET_SIZE(list) != n) {
        PyErr_SetString(PyExc_TypeError, "a list of the rules' sums was expected");
        return -1;
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *item = PyList_GET_ITEM(list, q);
        if (PyFloat_CheckExact(item)) {
            out[q] = PyFloat_AS_DOUBLE(item);
        } else {
            out[q] = PyFloat_AsDouble(item);
            if (out[q] == -1.0 && PyErr_Occurred())
                return -1;
        }
    }
    return 0;
}

/* Replace the list's items with these n doubles. */
static int
write_list(PyObject *list, Py_ssize_t n, const double *values)
{
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *value = PyFloat_FromDouble(values[q]);
        if (value == NULL)
            return -1;
        PyList_SetItem(list, q, value); /* steals value, releases the old item */
    }
    return 0;
}

/* add(a_fine, a_coarse, a_site, u_fine, u_coarse, u_site, softs, r, low): the lists in
 * Learner._sums's order, as best takes them. Learner._add: one ended job of run time r > 0
 * whose rules gave the soft walltimes softs (their smallest low) adds each rule's accuracy
 * to the three accuracy lists and 1.0 to the under-estimate lists of the rules short of r.
 * (The Python method's high only spares it comparisons, which are free here.) */
static PyObject *
kernel_add(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *lists[6], *softs;
    long long r, low;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!LL", &PyList_Type, &lists[0], &PyList_Type,
                          &lists[1], &PyList_Type, &lists[2], &PyList_Type, &lists[3],
                          &PyList_Type, &lists[4], &PyList_Type, &lists[5], &PyTuple_Type,
                          &softs, &r, &low))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(softs);
    if (n < 1 || n > MAX_RULES || r <= 0) {
        PyErr_SetString(PyExc_ValueError, "1 to 64 rules and a run time > 0 are expected");
        return NULL;
    }
    long long v[MAX_RULES];
    double acc[MAX_RULES], sums[6][MAX_RULES];
    double rd = (double)r;
    for (Py_ssize_t q = 0; q < n; q++) {
        v[q] = PyLong_AsLongLong(PyTuple_GET_ITEM(softs, q));
        if (v[q] == -1 && PyErr_Occurred())
            return NULL;
        if (v[q] < 1) {
            PyErr_SetString(PyExc_ValueError, "a soft walltime is below 1 s");
            return NULL;
        }
        /* Learner._add: r / v when the rule is not short, v / r when it is */
        acc[q] = v[q] < r ? (double)v[q] / rd : rd / (double)v[q];
    }
    /* every list read before anything is written: a refusal leaves the table as it was */
    for (int level = 0; level < 6; level++)
        if (read_list(lists[level], n, sums[level]) < 0)
            return NULL;
    for (int level = 0; level < 3; level++) {
        for (Py_ssize_t q = 0; q < n; q++)
            sums[level][q] = sums[level][q] + acc[q];
        if (write_list(lists[level], n, sums[level]) < 0)
            return NULL;
    }
    if (r > low) { /* the rules short of r count one more under-estimate */
        for (int level = 3; level < 6; level++) {
            for (Py_ssize_t q = 0; q < n; q++) {
                if (v[q] >= r)
                    continue;
                PyObject *value = PyFloat_FromDouble(sums[level][q] + 1.0);
                if (value == NULL)
                    return NULL;
                PyList_SetItem(lists[level], q, value);
            }
        }
    }
    Py_RETURN_NONE;
}

/* best(a_fine, a_coarse, a_site, u_fine, u_coarse, u_site, df, dc, ws, wc, lam):
 * Learner._best: the first rule with the largest
 * fa x df + (ca x dc + sa x ws) x wc - lam x (fu x df + (cu x dc + su x ws) x wc). */
static PyObject *
kernel_best(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *lists[6];
    double df, dc, ws, wc, lam;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!ddddd", &PyList_Type, &lists[0], &PyList_Type,
                          &lists[1], &PyList_Type, &lists[2], &PyList_Type, &lists[3],
                          &PyList_Type, &lists[4], &PyList_Type, &lists[5], &df, &dc, &ws,
                          &wc, &lam))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lists[0]);
    if (n < 1 || n > MAX_RULES) {
        PyErr_SetString(PyExc_ValueError, "1 to 64 rules are expected");
        return NULL;
    }
    double s[6][MAX_RULES];
    for (int k = 0; k < 6; k++)
        if (read_list(lists[k], n, s[k]) < 0)
            return NULL;
    Py_ssize_t best = 0;
    double top = 0.0;
    for (Py_ssize_t q = 0; q < n; q++) {
        double acc = s[0][q] * df + (s[1][q] * dc + s[2][q] * ws) * wc;
        double under = s[3][q] * df + (s[4][q] * dc + s[5][q] * ws) * wc;
        double value = acc - lam * under;
        if (q == 0 || value > top) { /* the first of equal values, as list.index(max()) */
            top = value;
            best = q;
        }
    }
    return PyLong_FromSsize_t(best);
}

static PyMethodDef methods[] = {
    {"add", kernel_add, METH_VARARGS, "Learner._add in C: one ended job into the sums."},
    {"best", kernel_best, METH_VARARGS, "Learner._best in C: the rule with the best score."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_learned_kernel",
    "learned's table loops in C (softwalltime.replay.learned_native).", -1, methods,
};

PyMODINIT_FUNC
PyInit__learned_kernel(void)
{
    return PyModule_Create(&module);
}
