/* agnograd._speedups: the hot paths of agnograd in C.
 *
 * FunctionNode.apply and the engine's backward loop run once per operation; in
 * Python their bookkeeping (building Variables and VariableNodes, linking the
 * graph, popping nodes by rank, summing gradients) costs several times the
 * arithmetic on small arrays. This module does the common case of each in C:
 *
 *   apply(func, inputs)   eager mode, no function hooks;
 *   run(seeds, retain_grad, clear_buffer, helpers)
 *                         ordinary backprop: no double backprop, no grad()
 *                         targets, no global hooks, no moved leaves;
 *   kernels               the forward and backward of the commonest nodes;
 *   operators             Variable's + - * /.
 *
 * The Python code in _function.py and _engine.py stays the reference: apply
 * hands anything else to it, _engine._run only calls run() in the case above,
 * and every rarer step inside the loop (broadcast sums, dtype casts, retained
 * gradients, freeing buffers, local hooks) is a call back into the Python helper
 * that the reference uses. The test suite runs on both (AGNOGRAD_PURE_PYTHON=1
 * turns this module off).
 *
 * Variable and VariableNode are Python classes with __slots__; their slots are
 * read and written at the offsets that the slot descriptors report, found once
 * by init().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

#if PY_VERSION_HEX < 0x030D0000 /* its name before 3.13 */
#define PyObject_GetOptionalAttr _PyObject_LookupAttr
#endif

/* -- the state of a function node ----------------------------------------------
 *
 * FunctionNode derives from NodeBase when this module is built (from a Python
 * class with the same attributes and defaults otherwise): the state that apply
 * and the loop touch for every node lives in C fields rather than in the
 * instance dict. */
typedef struct {
    PyObject_HEAD
    PyObject *inputs;  /* tuple of VariableNodes, or None */
    PyObject *outputs; /* tuple of weak references to VariableNodes, or None */
    PyObject *rank;    /* int */
    PyObject *xp;
    PyObject *saved_inputs, *saved_outputs, *saved_versions;
    PyObject *local_hooks;
    char variables_in_backward;
    unsigned long long pushed_in; /* the last backward loop that queued this node */
} NodeBase;

static PyMemberDef node_base_members[] = {
    {"inputs", T_OBJECT, offsetof(NodeBase, inputs), 0, NULL},
    {"outputs", T_OBJECT, offsetof(NodeBase, outputs), 0, NULL},
    {"rank", T_OBJECT, offsetof(NodeBase, rank), 0, NULL},
    {"xp", T_OBJECT, offsetof(NodeBase, xp), 0, NULL},
    {"_saved_inputs", T_OBJECT, offsetof(NodeBase, saved_inputs), 0, NULL},
    {"_saved_outputs", T_OBJECT, offsetof(NodeBase, saved_outputs), 0, NULL},
    {"_saved_versions", T_OBJECT, offsetof(NodeBase, saved_versions), 0, NULL},
    {"_local_hooks", T_OBJECT, offsetof(NodeBase, local_hooks), 0, NULL},
    {"_variables_in_backward", T_BOOL, offsetof(NodeBase, variables_in_backward), 0, NULL},
    {NULL},
};

static PyObject *zero;

static PyObject *
node_base_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if ((PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) &&
        type->tp_init == PyBaseObject_Type.tp_init) {
        PyErr_Format(PyExc_TypeError, "%.200s() takes no arguments", type->tp_name);
        return NULL;
    }
    NodeBase *self = (NodeBase *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->rank = Py_NewRef(zero);
    }
    return (PyObject *)self;
}

/* NodeBase is a static type under heap-type subclasses: their subtype_traverse
 * visits the type and their subtype_dealloc releases it. */
static int
node_base_traverse(NodeBase *self, visitproc visit, void *arg)
{
    Py_VISIT(self->inputs);
    Py_VISIT(self->outputs);
    Py_VISIT(self->rank);
    Py_VISIT(self->xp);
    Py_VISIT(self->saved_inputs);
    Py_VISIT(self->saved_outputs);
    Py_VISIT(self->saved_versions);
    Py_VISIT(self->local_hooks);
    return 0;
}

static int
node_base_clear(NodeBase *self)
{
    Py_CLEAR(self->inputs);
    Py_CLEAR(self->outputs);
    Py_CLEAR(self->rank);
    Py_CLEAR(self->xp);
    Py_CLEAR(self->saved_inputs);
    Py_CLEAR(self->saved_outputs);
    Py_CLEAR(self->saved_versions);
    Py_CLEAR(self->local_hooks);
    return 0;
}

static void
node_base_dealloc(NodeBase *self)
{
    PyObject_GC_UnTrack(self);
    node_base_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* (instance dict, {field: value}) as object.__getstate__ gives for slots: the C
 * fields, and the __slots__ of subclasses (copyreg._slotnames lists them). */
static PyObject *
node_base_getstate(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *fields = PyDict_New();
    if (fields == NULL) return NULL;
    for (PyMemberDef *m = node_base_members; m->name != NULL; m++) {
        PyObject *v = PyMember_GetOne((const char *)self, m);
        if (v == NULL || PyDict_SetItemString(fields, m->name, v) < 0) {
            Py_XDECREF(v); Py_DECREF(fields); return NULL;
        }
        Py_DECREF(v);
    }
    PyObject *copyreg = PyImport_ImportModule("copyreg");
    PyObject *names = copyreg == NULL ? NULL
                                      : PyObject_CallMethod(copyreg, "_slotnames", "O", Py_TYPE(self));
    Py_XDECREF(copyreg);
    PyObject *names_seq = names == NULL ? NULL : PySequence_Fast(names, "__slotnames__");
    Py_XDECREF(names);
    if (names_seq == NULL) { Py_DECREF(fields); return NULL; }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(names_seq); i++) {
        PyObject *name = PySequence_Fast_GET_ITEM(names_seq, i), *v;
        int found = PyObject_GetOptionalAttr(self, name, &v); /* an empty slot is left out */
        if (found > 0) {
            found = PyDict_SetItem(fields, name, v) < 0 ? -1 : 1;
            Py_DECREF(v);
        }
        if (found < 0) { Py_DECREF(names_seq); Py_DECREF(fields); return NULL; }
    }
    Py_DECREF(names_seq);
    PyObject *dict = PyObject_GenericGetDict(self, NULL);
    if (dict == NULL) { PyErr_Clear(); dict = Py_NewRef(Py_None); }
    return Py_BuildValue("(NN)", dict, fields);
}
static PyMethodDef node_base_methods[] = {
    {"__getstate__", node_base_getstate, METH_NOARGS, NULL}, {NULL}};

static PyTypeObject NodeBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "agnograd._speedups.NodeBase",
    .tp_doc = "The per-node state of FunctionNode, in C fields.",
    .tp_basicsize = sizeof(NodeBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = node_base_new,
    .tp_traverse = (traverseproc)node_base_traverse,
    .tp_clear = (inquiry)node_base_clear,
    .tp_dealloc = (destructor)node_base_dealloc,
    .tp_members = node_base_members,
    .tp_methods = node_base_methods,
};

#define NODE(func) ((NodeBase *)(func))

/* What init() is given, kept for the life of the interpreter. */
static PyTypeObject *variable_type, *node_type;
static Py_ssize_t var_data, var_grad, var_node;
static Py_ssize_t node_variable, node_creator, node_data, node_name, node_requires_grad,
    node_rank, node_shape, node_dtype, node_persistent;
static PyObject *auto_forward, *enable_backprop, *function_hooks; /* ContextVars */
static PyObject *namespaces;  /* dict: array type -> namespace */
static PyObject *versions;    /* dict: id(array) -> in-place writes */
static PyObject *apply_python, *raw_namespace, *as_constant, *mixed_backends,
    *forward_failed, *record_versions;

static PyObject *s_forward, *s_backward, *s_differentiable, *s_retain_in, *s_retain_out,
    *s_shape, *s_dtype, *s_label, *s_receives_variables, *s_requires_grad, *s_creator_node;

static Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descr = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "_speedups: %s.%s is not an object slot", type->tp_name,
                     name);
        return -1;
    }
    return ((PyMemberDescrObject *)descr)->d_member->offset;
}

/* 1 if the ContextVar holds a true value, 0 if not, -1 on error. */
static int
context_flag(PyObject *var)
{
    PyObject *value;
    if (PyContextVar_Get(var, NULL, &value) < 0) {
        return -1;
    }
    if (value == NULL) {
        PyErr_SetString(PyExc_LookupError, "_speedups: a configuration variable has no value");
        return -1;
    }
    int flag = value == Py_True ? 1 : value == Py_False ? 0 : PyObject_IsTrue(value);
    Py_DECREF(value);
    return flag;
}

/* Whether an instance of `type` has no attributes of its own (no dict) and the
 * generic getattr: then its class's attributes are its own. */
static int
class_decides(PyTypeObject *type)
{
    int has_dict = type->tp_dictoffset != 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
    has_dict |= (type->tp_flags & Py_TPFLAGS_MANAGED_DICT) != 0;
#endif
    return !has_dict && type->tp_getattro == PyObject_GenericGetAttr;
}

/* getattr(node, name) for what node classes declare: `differentiable`, what to
 * retain, ... Where the class decides and its attribute is no descriptor, that
 * attribute is the answer, found in the type's cache (the generic getattr would
 * also look for an instance dict first). */
static PyObject *
declared_attr(PyObject *node, PyObject *name)
{
    PyTypeObject *type = Py_TYPE(node);
    if (class_decides(type)) {
        PyObject *value = _PyType_Lookup(type, name); /* borrowed */
        if (value != NULL && Py_TYPE(value)->tp_descr_get == NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(node, name);
}

/* An array's `shape` or `dtype`, which every op reads. Most libraries define them
 * with a getset descriptor of the array type (a data descriptor: an instance dict
 * cannot override it); its getter is remembered with the type's version tag,
 * which changes if the type is modified, and then called directly. */
typedef struct {
    PyObject *name;
    PyTypeObject *type; /* borrowed: compared only, along with the tag */
    unsigned int version;
    getter get;
    void *closure;
} ArrayAttr;

static ArrayAttr array_shape, array_dtype; /* names set in PyInit__speedups */

/* Whether the type has a version tag (which a change to the type resets). */
#if PY_VERSION_HEX >= 0x030D0000
#define HAS_VERSION_TAG(type) ((type)->tp_version_tag != 0)
#else
#define HAS_VERSION_TAG(type) (((type)->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) != 0)
#endif

static PyObject *
array_attr(PyObject *a, ArrayAttr *attr)
{
    PyTypeObject *type = Py_TYPE(a);
    if (type == attr->type && type->tp_version_tag == attr->version && HAS_VERSION_TAG(type)) {
        return attr->get(a, attr->closure);
    }
    PyObject *descr = type->tp_getattro == PyObject_GenericGetAttr
                          ? _PyType_Lookup(type, attr->name) /* borrowed; sets the tag */
                          : NULL;
    /* The descriptor's own class must be one of the type's (as getattr checks): a
     * class may hold another's descriptor. */
    if (descr != NULL && Py_IS_TYPE(descr, &PyGetSetDescr_Type) &&
        ((PyGetSetDescrObject *)descr)->d_getset->get != NULL &&
        PyType_IsSubtype(type, PyDescr_TYPE(descr)) && HAS_VERSION_TAG(type)) {
        PyGetSetDef *def = ((PyGetSetDescrObject *)descr)->d_getset;
        *attr = (ArrayAttr){attr->name, type, type->tp_version_tag, def->get, def->closure};
        return def->get(a, def->closure);
    }
    return PyObject_GetAttr(a, attr->name);
}

/* bool(value), at once for the tuples of indexes that nodes declare. */
static int
truth(PyObject *value)
{
    return PyTuple_CheckExact(value) ? PyTuple_GET_SIZE(value) != 0 : PyObject_IsTrue(value);
}

static int
truthy_attr(PyObject *obj, PyObject *name)
{
    PyObject *value = declared_attr(obj, name);
    if (value == NULL) {
        return -1;
    }
    int flag = truth(value);
    Py_DECREF(value);
    return flag;
}

/* A weak reference without a callback: it holds no strong reference. */
static int
plain_weakref(PyObject *obj)
{
    return PyWeakref_CheckRefExact(obj) && ((PyWeakReference *)obj)->wr_callback == NULL;
}

/* Leave objects that cannot be part of a reference cycle to reference counting.
 *
 * Every op adds a VariableNode, a FunctionNode, two weak references and a few
 * tuples that live until backward. The cyclic collector would keep walking them,
 * and promoting them to its oldest generation, whose full collections (walking
 * every object of the program) then run several times as often. A weak
 * reference without a callback holds no strong reference, and a tuple holds
 * only its items; CPython itself untracks such tuples, but only once a
 * collection has walked them. */
static PyObject *
untracked(PyObject *obj)
{
    if (!PyObject_GC_IsTracked(obj)) { /* a shared shape, a tuple CPython untracked */
        return obj;
    }
    if (PyTuple_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
            /* Items that stay out of cycles for good. (Not an untracked dict: CPython
             * tracks it again once it holds a container.) */
            PyObject *item = PyTuple_GET_ITEM(obj, i);
            if (PyObject_IS_GC(item) && (PyObject_GC_IsTracked(item) ||
                                         !(PyTuple_CheckExact(item) || plain_weakref(item)))) {
                return obj;
            }
        }
    }
    else if (!plain_weakref(obj)) {
        return obj;
    }
    PyObject_GC_UnTrack(obj);
    return obj;
}

/* The Variable (and its VariableNode) of a new output: _variable._new_variable.
 * `like` is a shape tuple to share when the output's shape is equal (that of an
 * input, usually), or NULL: a graph then keeps one tuple per shape rather than
 * one per node. */
static PyObject *
new_variable(PyObject *data, int requires_grad, PyObject *creator, PyObject *rank,
             PyObject *like)
{
    PyObject *shape = array_attr(data, &array_shape);
    if (shape == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(shape)) {
        Py_SETREF(shape, PySequence_Tuple(shape));
        if (shape == NULL) {
            return NULL;
        }
    }
    if (like != NULL && PyTuple_CheckExact(like)) {
        int same = PyObject_RichCompareBool(shape, like, Py_EQ);
        if (same < 0) {
            Py_DECREF(shape);
            return NULL;
        }
        if (same) {
            Py_SETREF(shape, Py_NewRef(like));
        }
    }
    PyObject *dtype = array_attr(data, &array_dtype);
    if (dtype == NULL) {
        Py_DECREF(shape);
        return NULL;
    }
    PyObject *var = variable_type->tp_alloc(variable_type, 0);
    PyObject *node = node_type->tp_alloc(node_type, 0);
    PyObject *ref = var == NULL ? NULL : PyWeakref_NewRef(var, NULL);
    if (ref != NULL) {
        untracked(ref);
    }
    if (ref == NULL || node == NULL) {
        Py_XDECREF(ref);
        Py_XDECREF(node);
        Py_XDECREF(var);
        Py_DECREF(shape);
        Py_DECREF(dtype);
        return NULL;
    }
    SLOT(var, var_data) = Py_NewRef(data);
    SLOT(var, var_grad) = Py_NewRef(Py_None);
    SLOT(var, var_node) = node;
    SLOT(node, node_variable) = ref;
    SLOT(node, node_creator) = Py_NewRef(creator);
    SLOT(node, node_data) = Py_NewRef(Py_None);
    SLOT(node, node_name) = Py_NewRef(Py_None);
    SLOT(node, node_requires_grad) = Py_NewRef(requires_grad ? Py_True : Py_False);
    SLOT(node, node_rank) = Py_NewRef(rank);
    SLOT(node, node_shape) = untracked(shape);
    SLOT(node, node_dtype) = dtype;
    SLOT(node, node_persistent) = Py_NewRef(Py_False);
    return var;
}

/* tuple(items[i] for i in indexes), with Python's negative indexes. */
static PyObject *
pick(PyObject *items, PyObject *indexes)
{
    /* Tuples, whose items stay put while __index__ runs Python code. */
    PyObject *seq = PySequence_Tuple(indexes);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq), size = PyTuple_GET_SIZE(items), k = 0;
    while (k < n && k < size && PyLong_CheckExact(PyTuple_GET_ITEM(seq, k))) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(seq, k));
        if (i != k) {
            PyErr_Clear(); /* an int too large: the loop below raises */
            break;
        }
        k++;
    }
    if (k == n && n == size) { /* all of them, in order: the tuple itself */
        Py_DECREF(seq);
        return Py_NewRef(items);
    }
    PyObject *result = PyTuple_New(n);
    for (k = 0; result != NULL && k < n; k++) {
        Py_ssize_t i = PyNumber_AsSsize_t(PyTuple_GET_ITEM(seq, k), PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) {
            Py_CLEAR(result);
            break;
        }
        if (i < 0) {
            i += size;
        }
        if (i < 0 || i >= size) {
            PyErr_SetString(PyExc_IndexError, "tuple index out of range");
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, k, Py_NewRef(PyTuple_GET_ITEM(items, i)));
    }
    Py_DECREF(seq);
    return result;
}

/* Save func's retained inputs and outputs, as FunctionNode.apply does. */
static int
retain(PyObject *func, PyObject *arrays, PyObject *outputs)
{
    PyObject *names[2] = {s_retain_in, s_retain_out};
    PyObject *sources[2] = {arrays, outputs};
    PyObject **targets[2] = {&NODE(func)->saved_inputs, &NODE(func)->saved_outputs};
    for (int k = 0; k < 2; k++) {
        PyObject *indexes = declared_attr(func, names[k]);
        if (indexes == NULL) {
            return -1;
        }
        int nonempty = truth(indexes);
        PyObject *saved = nonempty > 0 ? pick(sources[k], indexes) : NULL;
        Py_DECREF(indexes);
        if (nonempty < 0 || (nonempty && saved == NULL)) {
            return -1;
        }
        if (saved != NULL) {
            Py_XSETREF(*targets[k], untracked(saved));
        }
    }
    if (PyDict_GET_SIZE(versions)) {
        PyObject *r = PyObject_CallOneArg(record_versions, func);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
    }
    return 0;
}

/* Let the Python helper add a note naming the function and its inputs. */
static void
note_forward_error(PyObject *func, PyObject *arrays)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) {
        PyException_SetTraceback(value, tb);
    }
    if (value != NULL && PyObject_TypeCheck(value, (PyTypeObject *)PyExc_Exception)) {
        PyObject *r = PyObject_CallFunctionObjArgs(forward_failed, value, func, arrays, NULL);
        if (r == NULL) {
            /* As in Python: the helper's own error, raised while handling the first. */
            PyObject *new_type, *new_value, *new_tb;
            PyErr_Fetch(&new_type, &new_value, &new_tb);
            PyErr_NormalizeException(&new_type, &new_value, &new_tb);
            if (new_value != NULL) {
                PyException_SetContext(new_value, Py_NewRef(value)); /* steals */
            }
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            PyErr_Restore(new_type, new_value, new_tb);
            return;
        }
        Py_DECREF(r);
    }
    PyErr_Restore(type, value, tb);
}

/* -- kernels: the forward and backward of the commonest nodes ------------------
 *
 * Elementwise arithmetic and the unary functions are one-line Python methods;
 * on small arrays, entering the interpreter to run them costs more than the
 * line itself. A kernel is the C version of one node class's forward and
 * backward, and install_kernels() makes it the class's methods, so that Python
 * finds it as it finds any method: a subclass or an instance with a forward or
 * backward of its own still gets its own. The Python methods stay the
 * reference: a kernel hands them what is not its common case (complex arrays
 * in Mul and Div, arrays written in place or already freed, the Variables of
 * double backprop, unary functions outside the standard, a subclass with its
 * own get_retained_inputs, a node never applied, odd calls). */

#define DECLINED Py_NotImplemented /* a kernel's "not mine"; never reaches Python */

typedef struct Kernel Kernel;
typedef PyObject *(*ForwardKernel)(const Kernel *k, PyObject *func, PyObject *arrays);
typedef PyObject *(*BackwardKernel)(const Kernel *k, PyObject *func, PyObject *indexes,
                                    PyObject *gys);

struct Kernel {
    const char *name; /* the node class's, as install_kernels() is given it */
    Py_ssize_t arity; /* its inputs; calls with other counts go to the Python method */
    binaryfunc op;    /* the arithmetic, for the kernels shared by several classes */
    ForwardKernel forward;
    BackwardKernel backward;
    PyTypeObject *cls;                          /* the class it is installed on */
    PyObject *python_forward, *python_backward; /* the reference; what a decline runs */
};

static PyObject *s_fn, *s_compute, *s_rule, *s_value, *s_conjugate, *s_conj;
static PyObject *is_complex_python;        /* _elementwise._is_complex */
static PyObject *base_get_retained_inputs; /* FunctionNode.get_retained_inputs */
static PyObject *s_get_retained_inputs;

/* A tuple of the n items given (stolen); NULL if any of them is NULL. */
static PyObject *
tuple_of(Py_ssize_t n, PyObject **items)
{
    PyObject *t = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == NULL) {
            goto error;
        }
    }
    if ((t = PyTuple_New(n)) == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(t, i, items[i]);
    }
    return t;
error:
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(items[i]);
    }
    return NULL;
}

static PyObject *
one(PyObject *item)
{
    return tuple_of(1, &item);
}

/* Whether the array has a complex dtype, as _elementwise._is_complex says: 1, 0,
 * or -1 on error. Real dtypes are remembered by identity (they are few, and
 * shared objects in the libraries agnograd knows), so that the Python function
 * runs about once per dtype. */
static PyObject *real_dtypes[8];
static int
is_complex(PyObject *a)
{
    PyObject *dtype = array_attr(a, &array_dtype);
    if (dtype == NULL) {
        return -1;
    }
    size_t n = sizeof(real_dtypes) / sizeof(real_dtypes[0]), i = 0;
    for (; i < n && real_dtypes[i] != NULL; i++) {
        if (real_dtypes[i] == dtype) {
            Py_DECREF(dtype);
            return 0;
        }
    }
    if (is_complex_python == NULL) {
        Py_DECREF(dtype);
        PyErr_SetString(PyExc_RuntimeError, "_speedups: install_kernels() was not called");
        return -1;
    }
    PyObject *r = PyObject_CallOneArg(is_complex_python, a);
    int complex = r == NULL ? -1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    /* The call ran Python code, which may have filled slots meanwhile. */
    for (i = 0; complex == 0 && i < n && real_dtypes[i] != dtype; i++) {
        if (real_dtypes[i] == NULL) {
            real_dtypes[i] = Py_NewRef(dtype); /* kept for good */
            break;
        }
    }
    Py_DECREF(dtype);
    return complex;
}

/* conjugate_if_complex(xp, a): _elementwise._c, which many rules call: conj(a)
 * for complex arrays, a itself for real ones, a.conjugate() for Python scalars. */
static PyObject *
conjugate_if_complex(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "conjugate_if_complex(xp, a) takes two arguments");
        return NULL;
    }
    PyObject *xp = args[0], *a = args[1];
    PyTypeObject *type = Py_TYPE(a);
    if (type == &PyFloat_Type || type == &PyLong_Type || type == &PyBool_Type ||
        type == &PyComplex_Type) {
        return PyObject_CallMethodNoArgs(a, s_conjugate);
    }
    int complex = is_complex(a);
    if (complex < 0) {
        return NULL;
    }
    return complex ? PyObject_CallMethodOneArg(xp, s_conj, a) : Py_NewRef(a);
}

/* func's saved arrays (inputs or outputs: `saved`) as a new reference, when its
 * backward may read them raw: nothing was written in place and they were not
 * freed. Otherwise DECLINED: the Python accessors check, and raise. */
static PyObject *
saved_raw(PyObject *func, PyObject *saved, Py_ssize_t count)
{
    if (PyDict_GET_SIZE(versions) || NODE(func)->variables_in_backward || saved == NULL ||
        !PyTuple_CheckExact(saved) || PyTuple_GET_SIZE(saved) != count) {
        return Py_NewRef(DECLINED);
    }
    return Py_NewRef(saved);
}

/* Unary.forward: getattr(self.xp, type(self).fn)(x). A `compute` declines. */
static PyObject *
unary_forward(const Kernel *k, PyObject *func, PyObject *arrays)
{
    /* Cached lookups in the class's dicts (borrowed: no Python code runs before
     * they are used or held). Without a namespace (not applied) the Python raises. */
    PyObject *compute = _PyType_Lookup(Py_TYPE(func), s_compute);
    PyObject *fn = _PyType_Lookup(Py_TYPE(func), s_fn);
    PyObject *xp = NODE(func)->xp;
    if (compute != Py_None || fn == NULL || xp == NULL || xp == Py_None) {
        return Py_NewRef(DECLINED);
    }
    Py_INCREF(fn);
    Py_INCREF(xp);
    PyObject *f = PyObject_GetAttr(xp, fn);
    Py_DECREF(fn);
    Py_DECREF(xp);
    if (f == NULL) {
        return NULL;
    }
    PyObject *y = PyObject_CallOneArg(f, PyTuple_GET_ITEM(arrays, 0));
    Py_DECREF(f);
    return one(y);
}

/* Unary.backward: type(self).rule(xp, x, y, gy), given the x and y it keeps.
 * Double backprop and in-place writes decline even where nothing is kept: the
 * rule must then be given the gradient's namespace. */
static PyObject *
unary_backward(const Kernel *k, PyObject *func, PyObject *indexes, PyObject *gys)
{
    if (PyDict_GET_SIZE(versions) || NODE(func)->variables_in_backward) {
        return Py_NewRef(DECLINED);
    }
    /* What may run Python code comes first; the arrays and the namespace are
     * read after it, and held while the rule runs. */
    int keeps_x = truthy_attr(func, s_retain_in);
    int keeps_y = keeps_x < 0 ? -1 : truthy_attr(func, s_retain_out);
    PyObject *rule = keeps_y < 0 ? NULL : PyObject_GetAttr((PyObject *)Py_TYPE(func), s_rule);
    if (rule == NULL) {
        return NULL;
    }
    PyObject *saved_x = keeps_x ? saved_raw(func, NODE(func)->saved_inputs, 1) : NULL;
    PyObject *saved_y = keeps_y ? saved_raw(func, NODE(func)->saved_outputs, 1) : NULL;
    PyObject *xp = NODE(func)->xp, *result;
    if (saved_x == DECLINED || saved_y == DECLINED || xp == NULL) {
        result = Py_NewRef(DECLINED);
    }
    else {
        PyObject *args[5] = {NULL, Py_NewRef(xp), saved_x ? PyTuple_GET_ITEM(saved_x, 0) : Py_None,
                             saved_y ? PyTuple_GET_ITEM(saved_y, 0) : Py_None,
                             PyTuple_GET_ITEM(gys, 0)};
        result = one(PyObject_Vectorcall(rule, args + 1, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL));
        Py_DECREF(args[1]);
    }
    Py_XDECREF(saved_x);
    Py_XDECREF(saved_y);
    Py_DECREF(rule);
    return result;
}

/* Add, Sub, Mul and Div.forward: x1 <op> x2. */
static PyObject *
arithmetic_forward(const Kernel *k, PyObject *func, PyObject *arrays)
{
    return one(k->op(PyTuple_GET_ITEM(arrays, 0), PyTuple_GET_ITEM(arrays, 1)));
}

/* Add.backward: grad_outputs * len(indexes). */
static PyObject *
add_backward(const Kernel *k, PyObject *func, PyObject *indexes, PyObject *gys)
{
    return PySequence_Repeat(gys, PyTuple_GET_SIZE(indexes));
}

/* Index k of `indexes` as a C integer (they are the ints backprop_one made). */
#define INDEX(indexes, k) PyLong_AsSsize_t(PyTuple_GET_ITEM(indexes, k))

/* Sub.backward: gy for x1, -gy for x2. */
static PyObject *
sub_backward(const Kernel *k, PyObject *func, PyObject *indexes, PyObject *gys)
{
    PyObject *gy = PyTuple_GET_ITEM(gys, 0), *gx[2] = {NULL, NULL};
    Py_ssize_t n = PyTuple_GET_SIZE(indexes);
    for (Py_ssize_t k = 0; k < n && (k == 0 || gx[k - 1] != NULL); k++) {
        gx[k] = INDEX(indexes, k) == 0 ? Py_NewRef(gy) : PyNumber_Negative(gy);
    }
    return tuple_of(n, gx);
}

/* The saved inputs of Mul or Div, and gy, when the kernel may go on: 1, else 0
 * with *result set to DECLINED or NULL (an error). */
static int
real_operands(PyObject *func, PyObject *gys, PyObject **saved, PyObject **result)
{
    *result = NULL;
    if (_PyType_Lookup(Py_TYPE(func), s_get_retained_inputs) != base_get_retained_inputs) {
        *result = Py_NewRef(DECLINED); /* a subclass's own accessor: the Python runs it */
        return 0;
    }
    int complex = is_complex(PyTuple_GET_ITEM(gys, 0));
    if (complex < 0) {
        return 0;
    }
    *saved = complex ? Py_NewRef(DECLINED) : saved_raw(func, NODE(func)->saved_inputs, 2);
    if (*saved == DECLINED) {
        *result = *saved;
        return 0;
    }
    return 1;
}

/* Mul.backward: gy * x2 for x1, gy * x1 for x2. */
static PyObject *
mul_backward(const Kernel *k, PyObject *func, PyObject *indexes, PyObject *gys)
{
    PyObject *saved, *result, *gx[2] = {NULL, NULL};
    if (!real_operands(func, gys, &saved, &result)) {
        return result;
    }
    PyObject *gy = PyTuple_GET_ITEM(gys, 0);
    Py_ssize_t n = PyTuple_GET_SIZE(indexes);
    for (Py_ssize_t k = 0; k < n && (k == 0 || gx[k - 1] != NULL); k++) {
        gx[k] = PyNumber_Multiply(gy, PyTuple_GET_ITEM(saved, 1 - INDEX(indexes, k)));
    }
    Py_DECREF(saved);
    return tuple_of(n, gx);
}

/* Div.backward: gy / x2 for x1, -(gy / x2) * x1 / x2 for x2. */
static PyObject *
div_backward(const Kernel *k, PyObject *func, PyObject *indexes, PyObject *gys)
{
    PyObject *saved, *result, *gx[2] = {NULL, NULL};
    if (!real_operands(func, gys, &saved, &result)) {
        return result;
    }
    PyObject *x1 = PyTuple_GET_ITEM(saved, 0), *x2 = PyTuple_GET_ITEM(saved, 1);
    PyObject *gx1 = PyNumber_TrueDivide(PyTuple_GET_ITEM(gys, 0), x2);
    Py_ssize_t n = PyTuple_GET_SIZE(indexes);
    for (Py_ssize_t k = 0; gx1 != NULL && k < n && (k == 0 || gx[k - 1] != NULL); k++) {
        if (INDEX(indexes, k) == 0) {
            gx[k] = Py_NewRef(gx1);
            continue;
        }
        PyObject *neg = PyNumber_Negative(gx1);
        PyObject *prod = neg == NULL ? NULL : PyNumber_Multiply(neg, x1);
        gx[k] = prod == NULL ? NULL : PyNumber_TrueDivide(prod, x2);
        Py_XDECREF(neg);
        Py_XDECREF(prod);
    }
    Py_XDECREF(gx1);
    Py_DECREF(saved);
    return gx1 == NULL ? NULL : tuple_of(n, gx);
}

/* AddConstant, MulConstant and DivConstant.forward: x <op> self.value. */
static PyObject *
scalar_forward(const Kernel *k, PyObject *func, PyObject *arrays)
{
    PyObject *value = PyObject_GetAttr(func, s_value);
    if (value == NULL) {
        return NULL;
    }
    PyObject *y = k->op(PyTuple_GET_ITEM(arrays, 0), value);
    Py_DECREF(value);
    return one(y);
}

/* AddConstant.backward: grad_outputs itself. */
static PyObject *
add_constant_backward(const Kernel *k, PyObject *func, PyObject *indexes, PyObject *gys)
{
    return Py_NewRef(gys);
}

/* MulConstant and DivConstant.backward: gy <op> self.value.conjugate(). */
static PyObject *
scalar_backward(const Kernel *k, PyObject *func, PyObject *indexes, PyObject *gys)
{
    PyObject *value = PyObject_GetAttr(func, s_value);
    PyObject *conj = value == NULL ? NULL : PyObject_CallMethodNoArgs(value, s_conjugate);
    Py_XDECREF(value);
    if (conj == NULL) {
        return NULL;
    }
    PyObject *gx = k->op(PyTuple_GET_ITEM(gys, 0), conj);
    Py_DECREF(conj);
    return one(gx);
}

static Kernel kernels[] = {
    {"Unary", 1, NULL, unary_forward, unary_backward},
    {"Add", 2, PyNumber_Add, arithmetic_forward, add_backward},
    {"Sub", 2, PyNumber_Subtract, arithmetic_forward, sub_backward},
    {"Mul", 2, PyNumber_Multiply, arithmetic_forward, mul_backward},
    {"Div", 2, PyNumber_TrueDivide, arithmetic_forward, div_backward},
    {"AddConstant", 1, PyNumber_Add, scalar_forward, add_constant_backward},
    {"MulConstant", 1, PyNumber_Multiply, scalar_forward, scalar_backward},
    {"DivConstant", 1, PyNumber_TrueDivide, scalar_forward, scalar_backward},
};
#define N_KERNELS (sizeof(kernels) / sizeof(kernels[0]))

static const Kernel *
kernel_of(PyTypeObject *cls)
{
    for (size_t i = 0; i < N_KERNELS; i++) {
        if (kernels[i].cls == cls) {
            return &kernels[i];
        }
    }
    PyErr_Format(PyExc_SystemError, "_speedups: no kernel for %.100s", cls->tp_name);
    return NULL;
}

/* function(self, *args, **kwargs) in vectorcall form. */
static PyObject *
call_with_self(PyObject *function, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject *small[4];
    PyObject **stack = total < 4 ? small : PyMem_Malloc((total + 1) * sizeof(PyObject *));
    if (stack == NULL) {
        return PyErr_NoMemory();
    }
    stack[0] = self;
    memcpy(stack + 1, args, total * sizeof(PyObject *));
    Py_INCREF(function); /* install_kernels() may replace the table's meanwhile */
    PyObject *result = PyObject_Vectorcall(function, stack, nargs + 1, kwnames);
    Py_DECREF(function);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return result;
}

/* The forward installed on a kernel's class: forward(self, inputs). */
static PyObject *
forward_method(PyObject *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    const Kernel *k = kernel_of(cls);
    if (k == NULL) {
        return NULL;
    }
    if (nargs == 1 && kwnames == NULL && PyTuple_CheckExact(args[0]) &&
        PyTuple_GET_SIZE(args[0]) == k->arity) {
        PyObject *result = k->forward(k, self, args[0]);
        if (result != DECLINED) {
            return result;
        }
        Py_DECREF(result);
    }
    return call_with_self(k->python_forward, self, args, nargs, kwnames);
}

/* Whether indexes is a tuple of ints, each an input of the kernel's node. */
static int
plain_indexes(PyObject *indexes, Py_ssize_t arity)
{
    if (!PyTuple_CheckExact(indexes) || PyTuple_GET_SIZE(indexes) > arity) {
        return 0;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(indexes); k++) {
        PyObject *i = PyTuple_GET_ITEM(indexes, k);
        if (!PyLong_CheckExact(i)) {
            return 0;
        }
        Py_ssize_t v = PyLong_AsSsize_t(i);
        if (v < 0 || v >= arity) {
            PyErr_Clear(); /* too large for a Py_ssize_t: not ours either */
            return 0;
        }
    }
    return 1;
}

/* The backward installed on a kernel's class: backward(self, indexes, grad_outputs). */
static PyObject *
backward_method(PyObject *self, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
    const Kernel *k = kernel_of(cls);
    if (k == NULL) {
        return NULL;
    }
    /* Every kernel's node has one output. */
    if (nargs == 2 && kwnames == NULL && plain_indexes(args[0], k->arity) &&
        PyTuple_CheckExact(args[1]) && PyTuple_GET_SIZE(args[1]) == 1) {
        PyObject *result = k->backward(k, self, args[0], args[1]);
        if (result != DECLINED) {
            return result;
        }
        Py_DECREF(result);
    }
    return call_with_self(k->python_backward, self, args, nargs, kwnames);
}

static PyMethodDef apply_def;

static PyMethodDef kernel_defs[2] = {
    {"forward", (PyCFunction)(void (*)(void))forward_method,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "forward($self, inputs)\n--\n\nThis class's forward, in C (agnograd/_speedups.c)."},
    {"backward", (PyCFunction)(void (*)(void))backward_method,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "backward($self, target_input_indexes, grad_outputs)\n--\n\n"
     "This class's backward, in C (agnograd/_speedups.c)."},
};

/* PyObject_VectorcallMethod(name, args, nargs) (args[0] is self), but calling
 * this module's own methods (apply, the kernels) directly where the class decides
 * (class_decides): no lookup in an instance dict, no descriptor call. */
static PyObject *
call_method(PyObject *name, PyObject *const *args, Py_ssize_t nargs)
{
    PyTypeObject *type = Py_TYPE(args[0]);
    PyObject *descr = class_decides(type) ? _PyType_Lookup(type, name) : NULL; /* borrowed */
    if (descr != NULL && Py_IS_TYPE(descr, &PyMethodDescr_Type)) {
        PyMethodDef *def = ((PyMethodDescrObject *)descr)->d_method;
        if ((def == &apply_def || def == &kernel_defs[0] || def == &kernel_defs[1]) &&
            PyType_IsSubtype(type, PyDescr_TYPE(descr))) {
            PyCMethod method = (PyCMethod)(void (*)(void))def->ml_meth;
            return method(args[0], PyDescr_TYPE(descr), args + 1, nargs - 1, NULL);
        }
    }
    return PyObject_VectorcallMethod(name, args, nargs, NULL);
}

/* FunctionNode.apply(self, inputs), a method of NodeBase (so self is one). */
static PyObject *
apply(PyObject *func, PyTypeObject *defining, PyObject *const *args, Py_ssize_t nargs,
      PyObject *kwnames)
{
    if (nargs != 1 || kwnames != NULL) { /* keywords, or a wrong call: the reference's */
        return call_with_self(apply_python, func, args, nargs, kwnames);
    }
    PyObject *seq = args[0];
    /* The common case only; everything else is the reference's. */
    int eager = context_flag(auto_forward);
    if (eager < 0) {
        return NULL;
    }
    int hooks = context_flag(function_hooks);
    if (hooks < 0) {
        return NULL;
    }
    PyObject *local = NODE(func)->local_hooks;
    int local_hooks = local == NULL || local == Py_None ? 0 : PyObject_IsTrue(local);
    if (local_hooks < 0) {
        return NULL;
    }
    if (!eager || hooks || local_hooks || !(PyTuple_CheckExact(seq) || PyList_CheckExact(seq))) {
        return call_with_self(apply_python, func, args, 1, NULL);
    }
    /* A tuple (the same one, or a copy of a list), whose items stay put while
     * Python code runs. */
    PyObject *inputs = PySequence_Tuple(seq);
    if (inputs == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(inputs);
    PyObject *nodes = PyTuple_New(n), *arrays = PyTuple_New(n);
    PyObject *xp = NULL, *rank = NULL, *outputs = NULL, *results = NULL, *refs = NULL;
    PyObject *out_rank = NULL, *like = NULL;
    long max_rank = 0;
    int requires_grad = 0, fallback = 0;
    if (nodes == NULL || arrays == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(inputs, i);
        if (PyObject_TypeCheck(x, variable_type)) {
            Py_INCREF(x);
        }
        else if ((x = PyObject_CallOneArg(as_constant, x)) == NULL) {
            goto error;
        }
        PyObject *node = SLOT(x, var_node), *data = SLOT(x, var_data);
        if (node == NULL || data == NULL || !Py_IS_TYPE(node, node_type) ||
            SLOT(node, node_requires_grad) == NULL || SLOT(node, node_rank) == NULL) {
            /* Half-built objects: the reference raises the proper error. */
            Py_DECREF(x);
            fallback = 1;
            goto error;
        }
        PyTuple_SET_ITEM(nodes, i, Py_NewRef(node));
        PyTuple_SET_ITEM(arrays, i, Py_NewRef(data));
        Py_DECREF(x); /* its node and data are held by the tuples */
        PyObject *flag = SLOT(node, node_requires_grad);
        int wanted = flag == Py_True ? 1 : flag == Py_False ? 0 : PyObject_IsTrue(flag);
        if (wanted < 0) {
            goto error;
        }
        requires_grad |= wanted;
        long r = PyLong_AsLong(SLOT(node, node_rank));
        if (r == -1 && PyErr_Occurred()) {
            goto error;
        }
        if (n == 1 || r > max_rank) { /* one input: its rank; several: max(0, ...) */
            max_rank = r;
            Py_XSETREF(rank, Py_NewRef(SLOT(node, node_rank)));
        }
        PyObject *other = PyDict_GetItemWithError(namespaces, (PyObject *)Py_TYPE(data));
        if (other != NULL) {
            Py_INCREF(other);
        }
        else if (PyErr_Occurred() || (other = PyObject_CallOneArg(raw_namespace, data)) == NULL) {
            goto error;
        }
        if (xp == NULL) {
            xp = other;
        }
        else if (other != xp) {
            PyObject *exc = PyObject_CallFunctionObjArgs(mixed_backends, func, xp, other, NULL);
            Py_DECREF(other);
            if (exc != NULL) {
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
                Py_DECREF(exc);
            }
            goto error;
        }
        else {
            Py_DECREF(other);
        }
    }
    Py_XSETREF(NODE(func)->xp, Py_NewRef(xp == NULL ? Py_None : xp));
    PyObject *forward_args[2] = {func, arrays};
    PyObject *returned = call_method(s_forward, forward_args, 2);
    if (returned == NULL) {
        note_forward_error(func, arrays);
        goto error;
    }
    outputs = PySequence_Tuple(returned);
    Py_DECREF(returned);
    if (outputs == NULL) {
        goto error;
    }
    if (requires_grad) {
        int differentiable = truthy_attr(func, s_differentiable);
        if (differentiable < 0) {
            goto error;
        }
        requires_grad = differentiable;
    }
    int record = requires_grad ? context_flag(enable_backprop) : 0;
    if (record < 0) {
        goto error;
    }
    Py_ssize_t m = PyTuple_GET_SIZE(outputs);
    results = PyTuple_New(m);
    if (results == NULL) {
        goto error;
    }
    if (!record) {
        for (Py_ssize_t i = 0; i < m; i++) {
            PyObject *var =
                new_variable(PyTuple_GET_ITEM(outputs, i), requires_grad, Py_None, zero, NULL);
            if (var == NULL) {
                goto error;
            }
            PyTuple_SET_ITEM(results, i, var);
        }
        goto done;
    }
    out_rank = PyLong_FromLong(max_rank + 1);
    refs = PyTuple_New(m);
    if (out_rank == NULL || refs == NULL) {
        goto error;
    }
    /* The first input's shape, to share (new_variable). */
    like = n ? Py_XNewRef(SLOT(PyTuple_GET_ITEM(nodes, 0), node_shape)) : NULL;
    Py_XSETREF(NODE(func)->rank, Py_NewRef(rank == NULL ? zero : rank));
    Py_XSETREF(NODE(func)->inputs, Py_NewRef(nodes));
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *var = new_variable(PyTuple_GET_ITEM(outputs, i), 1, func, out_rank, like);
        if (var == NULL) {
            goto error;
        }
        PyTuple_SET_ITEM(results, i, var);
        PyObject *ref = PyWeakref_NewRef(SLOT(var, var_node), NULL);
        if (ref == NULL) {
            goto error;
        }
        PyTuple_SET_ITEM(refs, i, untracked(ref));
    }
    Py_XSETREF(NODE(func)->outputs, Py_NewRef(untracked(refs)));
    if (retain(func, arrays, outputs) < 0) {
        goto error;
    }
done:
    Py_XDECREF(like);
    Py_XDECREF(xp);
    Py_XDECREF(rank);
    Py_XDECREF(out_rank);
    Py_XDECREF(refs);
    Py_DECREF(outputs);
    Py_DECREF(nodes);
    Py_DECREF(arrays);
    Py_DECREF(inputs);
    return results;
error:
    Py_XDECREF(like);
    Py_XDECREF(inputs);
    Py_XDECREF(xp);
    Py_XDECREF(rank);
    Py_XDECREF(out_rank);
    Py_XDECREF(refs);
    Py_XDECREF(outputs);
    Py_XDECREF(results);
    Py_XDECREF(nodes);
    Py_XDECREF(arrays);
    return fallback ? call_with_self(apply_python, func, args, 1, NULL) : NULL;
}

/* -- operators: Variable's arithmetic with a Variable, an array or a scalar --------
 *
 * `x * y` is the commonest operation of all. In Python, the operator is a
 * function (made by _elementwise._binary) that the interpreter is entered for; here it
 * is a method descriptor of Variable, which CPython calls directly. It does what
 * the Python one does: a Python scalar on the right makes the node of an
 * operation with a constant (AddConstant(-y) for x - y), anything else the
 * binary node, and node.apply(inputs)[0] is the result. */

typedef struct {
    PyObject *node, *scalar_node; /* given by install_operators() */
    int negate;                   /* pass -y to scalar_node, as x - y does */
} Operator;

enum { OP_ADD, OP_RADD, OP_SUB, OP_MUL, OP_RMUL, OP_TRUEDIV, N_OPERATORS };
static Operator operators[N_OPERATORS];

static PyObject *s_apply, *s_init;
static PyObject *scalar_init; /* WithScalar.__init__, given by install_operators() */

/* scalar_node(value): the node of an operation with a constant. A class that keeps
 * WithScalar.__init__, which only stores `value`, and NodeBase's __new__ is made
 * without entering the __init__. */
static PyObject *
new_scalar_node(PyObject *cls, PyObject *value)
{
    PyTypeObject *type = (PyTypeObject *)cls;
    if (!PyType_Check(cls) || scalar_init == NULL || _PyType_Lookup(type, s_init) != scalar_init ||
        type->tp_new != node_base_new) { /* an __init__ or a __new__ of its own */
        return PyObject_CallOneArg(cls, value);
    }
    PyObject *no_args = PyTuple_New(0);
    PyObject *node = no_args == NULL ? NULL : type->tp_new(type, no_args, NULL);
    Py_XDECREF(no_args);
    if (node != NULL && PyObject_SetAttr(node, s_value, value) < 0) {
        Py_CLEAR(node);
    }
    return node;
}

static PyObject *
binary_operator(const Operator *op, PyObject *self, PyObject *other)
{
    PyTypeObject *type = Py_TYPE(other);
    int scalar = type == &PyFloat_Type || type == &PyLong_Type || type == &PyBool_Type ||
                 type == &PyComplex_Type;
    /* Held: install_operators() may replace the table's while Python code runs. */
    PyObject *cls = Py_NewRef(scalar ? op->scalar_node : op->node), *node, *inputs;
    if (scalar) {
        PyObject *value = op->negate ? PyNumber_Negative(other) : Py_NewRef(other);
        node = value == NULL ? NULL : new_scalar_node(cls, value);
        Py_XDECREF(value);
        inputs = PyTuple_Pack(1, self);
    }
    else {
        node = PyObject_CallNoArgs(cls);
        inputs = PyTuple_Pack(2, self, other);
    }
    Py_DECREF(cls);
    PyObject *results = NULL;
    if (node != NULL && inputs != NULL) {
        PyObject *args[2] = {node, inputs};
        results = call_method(s_apply, args, 2);
    }
    Py_XDECREF(node);
    Py_XDECREF(inputs);
    if (results == NULL) {
        return NULL;
    }
    PyObject *result = PyTuple_CheckExact(results) && PyTuple_GET_SIZE(results)
                           ? Py_NewRef(PyTuple_GET_ITEM(results, 0))
                           : PySequence_GetItem(results, 0);
    Py_DECREF(results);
    return result;
}

#define OPERATOR_METHOD(fn, which)                                                             \
    static PyObject *fn(PyObject *self, PyObject *other)                                       \
    {                                                                                          \
        return binary_operator(&operators[which], self, other);                                \
    }
OPERATOR_METHOD(op_add, OP_ADD)
OPERATOR_METHOD(op_radd, OP_RADD)
OPERATOR_METHOD(op_sub, OP_SUB)
OPERATOR_METHOD(op_mul, OP_MUL)
OPERATOR_METHOD(op_rmul, OP_RMUL)
OPERATOR_METHOD(op_truediv, OP_TRUEDIV)

static PyMethodDef operator_defs[N_OPERATORS] = {
    [OP_ADD] = {"__add__", op_add, METH_O, "Return self+value."},
    [OP_RADD] = {"__radd__", op_radd, METH_O, "Return value+self."},
    [OP_SUB] = {"__sub__", op_sub, METH_O, "Return self-value."},
    [OP_MUL] = {"__mul__", op_mul, METH_O, "Return self*value."},
    [OP_RMUL] = {"__rmul__", op_rmul, METH_O, "Return value*self."},
    [OP_TRUEDIV] = {"__truediv__", op_truediv, METH_O, "Return self/value."},
};

/* install_operators(Variable, {name: (node, scalar_node, negate)}, scalar_init): make
 * these the operators of Variable (the dunders that the dict names, all of them). */
static PyObject *
install_operators(PyObject *module, PyObject *args)
{
    PyObject *cls, *table, *init;
    if (!PyArg_ParseTuple(args, "O!O!O:install_operators", &PyType_Type, &cls, &PyDict_Type,
                          &table, &init)) {
        return NULL;
    }
    Py_XSETREF(scalar_init, Py_NewRef(init));
    if (PyDict_GET_SIZE(table) != N_OPERATORS) {
        PyErr_Format(PyExc_ValueError, "install_operators: expected %d operators", N_OPERATORS);
        return NULL;
    }
    for (int i = 0; i < N_OPERATORS; i++) {
        Operator *op = &operators[i];
        PyObject *entry = PyDict_GetItemString(table, operator_defs[i].ml_name); /* borrowed */
        if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
            PyErr_Format(PyExc_TypeError,
                         "install_operators: %s needs a (node, scalar_node, negate) entry",
                         operator_defs[i].ml_name);
            return NULL;
        }
        Py_INCREF(entry); /* its items stay put while __bool__ and setattr run */
        int negate = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 2));
        PyObject *descr = negate < 0 ? NULL : PyDescr_NewMethod((PyTypeObject *)cls, &operator_defs[i]);
        if (descr == NULL || PyObject_SetAttrString(cls, operator_defs[i].ml_name, descr) < 0) {
            Py_XDECREF(descr);
            Py_DECREF(entry);
            return NULL;
        }
        Py_DECREF(descr);
        Py_XSETREF(op->node, Py_NewRef(PyTuple_GET_ITEM(entry, 0)));
        Py_XSETREF(op->scalar_node, Py_NewRef(PyTuple_GET_ITEM(entry, 1)));
        op->negate = negate;
        Py_DECREF(entry);
    }
    Py_RETURN_NONE;
}

/* -- the backward loop ------------------------------------------------------- */

/* A binary min-heap of function nodes keyed by (-rank, order pushed). */
typedef struct {
    long key;
    Py_ssize_t order;
    PyObject *func; /* strong */
} Entry;

typedef struct {
    Entry *items;
    Py_ssize_t size, capacity, pushed;
    unsigned long long run; /* this loop's number, which the nodes it queues keep */
} Heap;

static int
entry_less(const Entry *a, const Entry *b)
{
    return a->key < b->key || (a->key == b->key && a->order < b->order);
}

static int
heap_push(Heap *heap, PyObject *func)
{
    if (!PyObject_TypeCheck(func, &NodeBaseType)) {
        PyErr_Format(PyExc_TypeError, "backward: a creator_node must be a FunctionNode, not %.100s",
                     Py_TYPE(func)->tp_name);
        return -1;
    }
    PyObject *r = NODE(func)->rank;
    long rank = r == NULL ? 0 : PyLong_AsLong(r);
    if (rank == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (heap->size == heap->capacity) {
        Py_ssize_t capacity = heap->capacity ? 2 * heap->capacity : 64;
        Entry *items = PyMem_Realloc(heap->items, capacity * sizeof(Entry));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        heap->items = items;
        heap->capacity = capacity;
    }
    Entry entry = {-rank, ++heap->pushed, Py_NewRef(func)};
    Py_ssize_t i = heap->size++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!entry_less(&entry, &heap->items[parent])) {
            break;
        }
        heap->items[i] = heap->items[parent];
        i = parent;
    }
    heap->items[i] = entry;
    return 0;
}

/* The function node of highest rank (a new reference). */
static PyObject *
heap_pop(Heap *heap)
{
    PyObject *top = heap->items[0].func;
    Entry last = heap->items[--heap->size];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= heap->size) {
            break;
        }
        if (child + 1 < heap->size && entry_less(&heap->items[child + 1], &heap->items[child])) {
            child++;
        }
        if (!entry_less(&heap->items[child], &last)) {
            break;
        }
        heap->items[i] = heap->items[child];
        i = child;
    }
    if (heap->size) {
        heap->items[i] = last;
    }
    return top;
}

static void
heap_clear(Heap *heap)
{
    for (Py_ssize_t i = 0; i < heap->size; i++) {
        Py_DECREF(heap->items[i].func);
    }
    PyMem_Free(heap->items);
}

/* A VariableNode attribute as a new reference: its slot, or getattr as the
 * reference does (for other objects, and slots that were deleted). */
static PyObject *
node_attr(PyObject *x, Py_ssize_t offset, PyObject *name)
{
    if (Py_IS_TYPE(x, node_type) && SLOT(x, offset) != NULL) {
        return Py_NewRef(SLOT(x, offset));
    }
    return PyObject_GetAttr(x, name);
}

/* grads[node] += g (or = g), consuming no reference. */
static int
accumulate(PyObject *grads, PyObject *node, PyObject *g)
{
    Py_ssize_t size = PyDict_GET_SIZE(grads);
    PyObject *prev = PyDict_SetDefault(grads, node, g); /* borrowed */
    if (prev == NULL || PyDict_GET_SIZE(grads) > size) { /* an error, or g was stored */
        return prev == NULL ? -1 : 0;
    }
    Py_INCREF(prev); /* the sum may run Python code */
    PyObject *sum = PyNumber_Add(prev, g);
    Py_DECREF(prev);
    if (sum == NULL) {
        return -1;
    }
    int status = PyDict_SetItem(grads, node, sum);
    Py_DECREF(sum);
    return status;
}

/* Push node's creator unless this loop pushed it before. A loop run while another
 * is under way (from a hook) marks nodes with its own number, and the outer loop
 * may then push one of them twice: the second time it is popped, its gradients
 * were all taken, and backprop_one does nothing. */
static int
push_creator(Heap *heap, PyObject *node)
{
    PyObject *creator = node_attr(node, node_creator, s_creator_node);
    if (creator == NULL) {
        return -1;
    }
    int status = 0;
    if (creator != Py_None &&
        !(PyObject_TypeCheck(creator, &NodeBaseType) && NODE(creator)->pushed_in == heap->run)) {
        status = heap_push(heap, creator); /* which checks it is a NodeBase */
        if (status == 0) {
            NODE(creator)->pushed_in = heap->run;
        }
    }
    Py_DECREF(creator);
    return status;
}

/* grads.pop(node, None) as a new reference (NULL, with no error, if absent). */
static PyObject *
pop_grad(PyObject *grads, PyObject *node)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *g;
    return PyDict_Pop(grads, node, &g) < 0 ? NULL : g;
#else
    /* Gradients are never None, which stands for "absent" here. */
    PyObject *g = _PyDict_Pop(grads, node, Py_None);
    if (g == Py_None) {
        Py_DECREF(g);
        return NULL;
    }
    return g;
#endif
}

/* What the weak reference points to (a new reference; None once it is dead). */
static PyObject *
strong_target(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *target;
    if (PyWeakref_GetRef(ref, &target) < 0) {
        return NULL;
    }
    return target == NULL ? Py_NewRef(Py_None) : target;
#else
    PyObject *target = PyWeakref_GetObject(ref); /* borrowed */
    return target == NULL ? NULL : Py_NewRef(target);
#endif
}

/* The helpers of _engine that the loop calls for rarer steps. */
typedef struct {
    PyObject *sum_to, *cast, *store_grad, *free, *call_backward;
} Helpers;

/* Whether obj.<name> differs from want: 1, 0, or -1 on error. (As `not ==`, which
 * answers at once for the very same object, as dtypes usually are.) */
static int
attr_differs(PyObject *obj, ArrayAttr *attr, PyObject *want)
{
    PyObject *have = array_attr(obj, attr);
    if (have == NULL) {
        return -1;
    }
    int same = PyObject_RichCompareBool(have, want, Py_EQ);
    Py_DECREF(have);
    return same < 0 ? -1 : !same;
}

/* The gradient gx of input x (i of func) summed to x's shape and cast to its dtype
 * by the reference's helpers, where it differs. Steals gx; a new reference. */
static PyObject *
conform(PyObject *gx, PyObject *x, PyObject *func, Py_ssize_t i, const Helpers *h)
{
    PyObject *shape = node_attr(x, node_shape, s_shape);
    int differs = shape == NULL ? -1 : attr_differs(gx, &array_shape, shape);
    if (differs > 0) {
        Py_SETREF(gx, PyObject_CallFunction(h->sum_to, "OOOn", gx, shape, func, i));
    }
    Py_XDECREF(shape);
    if (differs < 0 || gx == NULL) {
        Py_XDECREF(gx);
        return NULL;
    }
    PyObject *dtype = node_attr(x, node_dtype, s_dtype);
    differs = dtype == NULL ? -1 : attr_differs(gx, &array_dtype, dtype);
    if (differs > 0) {
        Py_SETREF(gx, PyObject_CallFunctionObjArgs(h->cast, gx, dtype, NULL));
    }
    Py_XDECREF(dtype);
    if (differs < 0 || gx == NULL) {
        Py_XDECREF(gx);
        return NULL;
    }
    return gx;
}

/* The target indexes of a node of at most SMALL_ARITY inputs, the bits of `mask`:
 * one tuple per set of indexes, shared (a new reference). */
#define SMALL_ARITY 4
static PyObject *
index_tuple(unsigned mask)
{
    static PyObject *tuples[1u << SMALL_ARITY]; /* kept for good */
    if (tuples[mask] == NULL) {
        PyObject *items[SMALL_ARITY];
        Py_ssize_t count = 0;
        for (int i = 0; i < SMALL_ARITY; i++) {
            if (mask & (1u << i)) {
                items[count++] = PyLong_FromLong(i); /* small ints: never NULL */
            }
        }
        if ((tuples[mask] = tuple_of(count, items)) == NULL) {
            return NULL;
        }
    }
    return Py_NewRef(tuples[mask]);
}

/* One function node's backward: gradients into `grads`, creators onto the heap. */
static int
backprop_one(PyObject *func, PyObject *grads, Heap *heap, PyObject *keep,
             int retain_grad, int clear_buffer, int conforming, const Helpers *h)
{
    int status = -1;
    PyObject *in_nodes = NULL, *outputs = NULL, *gys = NULL, *indexes = NULL, *gxs = NULL;
    PyObject *seq = NULL, *y_shape = NULL, *y_dtype = NULL;
    PyObject *passed = NULL; /* the one output's gradient (borrowed from gys) */
    unsigned long long unchanged = 0; /* bit j: the j-th gradient returned is `passed` */
    /* Only NodeBase instances enter the heap (heap_push). */
    in_nodes = Py_XNewRef(NODE(func)->inputs);
    if (in_nodes == NULL || !PyTuple_Check(in_nodes)) {
        PyObject *label = PyObject_GetAttr(func, s_label);
        if (label != NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "backward reached %S, which was unchained; its inputs are gone", label);
            Py_DECREF(label);
        }
        goto done;
    }
    outputs = Py_XNewRef(NODE(func)->outputs);
    if (outputs == NULL || !PyTuple_Check(outputs)) {
        PyErr_SetString(PyExc_TypeError, "a function node's outputs must be a tuple");
        goto done;
    }
    Py_ssize_t m = PyTuple_GET_SIZE(outputs);
    gys = PyTuple_New(m);
    if (gys == NULL) {
        goto done;
    }
    int any = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        /* A strong reference: the grads dict may hold the node's last one. */
        PyObject *y = strong_target(PyTuple_GET_ITEM(outputs, k));
        if (y == NULL) {
            goto done;
        }
        PyObject *gy = y == Py_None ? NULL : pop_grad(grads, y);
        int failed = PyErr_Occurred() != NULL;
        if (gy != NULL && conforming && m == 1 && Py_IS_TYPE(y, node_type)) {
            passed = gy;
            y_shape = Py_XNewRef(SLOT(y, node_shape));
            y_dtype = Py_XNewRef(SLOT(y, node_dtype));
        }
        if (gy != NULL) {
            any = 1;
            if (retain_grad) {
                PyObject *r = PyObject_CallFunctionObjArgs(h->store_grad, y, gy, NULL);
                failed = r == NULL;
                Py_XDECREF(r);
            }
        }
        Py_DECREF(y);
        if (failed) {
            Py_XDECREF(gy);
            goto done;
        }
        if (gy == NULL) {
            gy = Py_NewRef(Py_None);
        }
        PyTuple_SET_ITEM(gys, k, gy);
    }
    if (!any) {
        status = 0;
        goto done;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(in_nodes), count = 0;
    unsigned mask = 0; /* the inputs wanted, when they are few */
    if (n > SMALL_ARITY && (indexes = PyTuple_New(n)) == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *flag = node_attr(PyTuple_GET_ITEM(in_nodes, i), node_requires_grad, s_requires_grad);
        int wanted = flag == NULL ? -1 : PyObject_IsTrue(flag);
        Py_XDECREF(flag);
        if (wanted < 0) {
            goto done;
        }
        if (wanted && n <= SMALL_ARITY) {
            mask |= 1u << i;
            count++;
        }
        else if (wanted) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL) {
                goto done;
            }
            PyTuple_SET_ITEM(indexes, count++, index);
        }
    }
    if (count == 0) {
        status = 0;
        goto done;
    }
    if (n <= SMALL_ARITY) {
        if ((indexes = index_tuple(mask)) == NULL) {
            goto done;
        }
    }
    else if (count < n && _PyTuple_Resize(&indexes, count) < 0) {
        goto done;
    }
    int extras = truthy_attr(func, s_receives_variables);
    if (extras == 0 && NODE(func)->local_hooks != NULL && NODE(func)->local_hooks != Py_None) {
        extras = PyObject_IsTrue(NODE(func)->local_hooks);
    }
    if (extras < 0) {
        goto done;
    }
    if (extras) {
        PyObject *gy_list = PySequence_List(gys); /* the reference hands hooks a list */
        gxs = gy_list == NULL ? NULL
                              : PyObject_CallFunctionObjArgs(h->call_backward, func, in_nodes,
                                                             indexes, gy_list, NULL);
        Py_XDECREF(gy_list);
    }
    else {
        PyObject *call_args[3] = {func, indexes, gys};
        gxs = call_method(s_backward, call_args, 3);
    }
    /* Which gradients are the very one passed, known while gys holds it. */
    for (Py_ssize_t j = 0; passed != NULL && gxs != NULL && PyTuple_CheckExact(gxs) &&
                           j < PyTuple_GET_SIZE(gxs) && j < 64;
         j++) {
        unchanged |= (unsigned long long)(PyTuple_GET_ITEM(gxs, j) == passed) << j;
    }
    Py_CLEAR(gys);
    if (gxs == NULL) {
        goto done;
    }
    if (clear_buffer) {
        PyObject *r = PyObject_CallFunctionObjArgs(h->free, func, keep, NULL);
        if (r == NULL) {
            goto done;
        }
        Py_DECREF(r);
    }
    Py_ssize_t given = PyObject_Size(gxs); /* as len(gxs) in the reference */
    seq = given < 0 ? NULL : PySequence_Tuple(gxs);
    if (seq == NULL) {
        goto done;
    }
    int by_input = 0; /* one gradient per input rather than per target index */
    if (given != count) {
        if (given != n) {
            PyObject *label = PyObject_GetAttr(func, s_label);
            if (label != NULL) {
                PyErr_Format(PyExc_ValueError,
                             "backward of %S returned %zd gradients for %zd target inputs %R",
                             label, given, count, indexes);
                Py_DECREF(label);
            }
            goto done;
        }
        by_input = 1;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(indexes, k));
        PyObject *gx = PyTuple_GET_ITEM(seq, by_input ? i : k);
        if (gx == Py_None) {
            continue;
        }
        if (Py_IS_TYPE(gx, variable_type)) {
            gx = SLOT(gx, var_data);
        }
        Py_INCREF(gx);
        PyObject *x = PyTuple_GET_ITEM(in_nodes, i);
        /* With `conforming` seeds, every gradient in `grads` has its node's shape
         * and dtype. One passed through unchanged (by x + y, x - 1, ...) to an
         * input of that very shape and dtype then needs no check. (seq is gxs
         * itself when `unchanged` has bits.) */
        Py_ssize_t at = by_input ? i : k;
        int conforms = at < 64 && ((unchanged >> at) & 1) && y_shape != NULL &&
                       Py_IS_TYPE(x, node_type) &&
                       SLOT(x, node_shape) == y_shape && SLOT(x, node_dtype) == y_dtype;
        if (!conforms && (gx = conform(gx, x, func, i, h)) == NULL) {
            goto done;
        }
        int failed = accumulate(grads, x, gx) < 0 || push_creator(heap, x) < 0;
        Py_DECREF(gx);
        if (failed) {
            goto done;
        }
    }
    status = 0;
done:
    Py_XDECREF(y_shape);
    Py_XDECREF(y_dtype);
    Py_XDECREF(in_nodes);
    Py_XDECREF(outputs);
    Py_XDECREF(gys);
    Py_XDECREF(indexes);
    Py_XDECREF(gxs);
    Py_XDECREF(seq);
    return status;
}

static PyObject *
run(PyObject *module, PyObject *args)
{
    PyObject *seeds;
    int retain_grad, clear_buffer;
    Helpers h;
    if (!PyArg_ParseTuple(args, "O!pp(OOOOO):run", &PyList_Type, &seeds, &retain_grad,
                          &clear_buffer, &h.sum_to, &h.cast, &h.store_grad, &h.free,
                          &h.call_backward)) {
        return NULL;
    }
    static unsigned long long runs;
    PyObject *grads = PyDict_New(), *keep = PySet_New(NULL);
    Heap heap = {NULL, 0, 0, 0, ++runs};
    int conforming = 1; /* whether every seed has its node's shape and dtype */
    if (grads == NULL || keep == NULL) {
        goto error;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(seeds); k++) {
        PyObject *seed = PyList_GET_ITEM(seeds, k);
        if (!PyTuple_Check(seed) || PyTuple_GET_SIZE(seed) != 2 ||
            !Py_IS_TYPE(PyTuple_GET_ITEM(seed, 0), node_type)) {
            PyErr_SetString(PyExc_TypeError, "run: seeds must be (VariableNode, gradient) pairs");
            goto error;
        }
        PyObject *node = PyTuple_GET_ITEM(seed, 0), *gy = PyTuple_GET_ITEM(seed, 1);
        if (PySet_Add(keep, node) < 0 || accumulate(grads, node, gy) < 0 ||
            push_creator(&heap, node) < 0) {
            goto error;
        }
        /* A seed of another dtype (or an odd node) leaves every gradient to conform(). */
        int differs = SLOT(node, node_shape) == NULL || SLOT(node, node_dtype) == NULL;
        differs = differs ? 1 : attr_differs(gy, &array_shape, SLOT(node, node_shape));
        differs = differs ? differs : attr_differs(gy, &array_dtype, SLOT(node, node_dtype));
        if (differs < 0) {
            goto error;
        }
        conforming &= !differs;
    }
    while (heap.size) {
        PyObject *func = heap_pop(&heap);
        int status = backprop_one(func, grads, &heap, keep, retain_grad, clear_buffer,
                                  conforming, &h);
        Py_DECREF(func);
        if (status < 0) {
            goto error;
        }
    }
    heap_clear(&heap);
    Py_DECREF(keep);
    return grads;
error:
    heap_clear(&heap);
    Py_XDECREF(grads);
    Py_XDECREF(keep);
    return NULL;
}

/* -- set-up ---------------------------------------------------------------------- */

/* FunctionNode.apply: this module's apply, with the reference's docstring. */
static PyMethodDef apply_def = {"apply", (PyCFunction)(void (*)(void))apply,
                                 METH_METHOD | METH_FASTCALL | METH_KEYWORDS, NULL};
static PyObject *apply_doc;

static PyObject *
init(PyObject *module, PyObject *args)
{
    PyObject *var_cls, *node_cls;
    if (!PyArg_ParseTuple(args, "O!O!OOOO!O!OOOOOO:init", &PyType_Type, &var_cls, &PyType_Type,
                          &node_cls, &auto_forward, &enable_backprop, &function_hooks,
                          &PyDict_Type, &namespaces, &PyDict_Type, &versions, &apply_python,
                          &raw_namespace, &as_constant, &mixed_backends, &forward_failed,
                          &record_versions)) {
        return NULL;
    }
    PyObject *kept[] = {var_cls, node_cls, auto_forward, enable_backprop, function_hooks,
                        namespaces, versions, apply_python, raw_namespace, as_constant,
                        mixed_backends, forward_failed, record_versions};
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        Py_INCREF(kept[i]); /* for good: init runs once per interpreter */
    }
    variable_type = (PyTypeObject *)var_cls;
    node_type = (PyTypeObject *)node_cls;
    struct {
        PyTypeObject *type;
        const char *name;
        Py_ssize_t *offset;
    } slots[] = {
        {variable_type, "_data", &var_data},
        {variable_type, "_grad_var", &var_grad},
        {variable_type, "_node", &var_node},
        {node_type, "_variable", &node_variable},
        {node_type, "creator_node", &node_creator},
        {node_type, "_data", &node_data},
        {node_type, "name", &node_name},
        {node_type, "requires_grad", &node_requires_grad},
        {node_type, "rank", &node_rank},
        {node_type, "shape", &node_shape},
        {node_type, "dtype", &node_dtype},
        {node_type, "persistent", &node_persistent},
    };
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
        if ((*slots[i].offset = slot_offset(slots[i].type, slots[i].name)) < 0) {
            return NULL;
        }
    }
    PyObject *doc = PyObject_GetAttrString(apply_python, "__doc__");
    if (doc == NULL) {
        return NULL;
    }
    apply_doc = PyUnicode_FromFormat("apply(self, inputs)\n--\n\n%S", doc);
    Py_DECREF(doc);
    if (apply_doc == NULL || (apply_def.ml_doc = PyUnicode_AsUTF8(apply_doc)) == NULL) {
        return NULL;
    }
    /* A method descriptor, as the kernels: calls need no bound method. */
    return PyDescr_NewMethod(&NodeBaseType, &apply_def);
}

/* Whether obj is the descriptor install_kernels() made from kernel_defs[m]. */
static int
is_installed(PyObject *obj, int m)
{
    return Py_IS_TYPE(obj, &PyMethodDescr_Type) &&
           ((PyMethodDescrObject *)obj)->d_method == &kernel_defs[m];
}

/* install_kernels(classes, is_complex, get_retained_inputs): make the kernels the
 * forward and backward of the node classes, given by name, keeping their Python
 * methods to fall back on. Classes already given their kernels (a module that
 * is reloaded) keep them. */
static PyObject *
install_kernels(PyObject *module, PyObject *args)
{
    PyObject *classes, *complex_check, *accessor;
    if (!PyArg_ParseTuple(args, "O!OO:install_kernels", &PyDict_Type, &classes, &complex_check,
                          &accessor)) {
        return NULL;
    }
    for (size_t i = 0; i < N_KERNELS; i++) {
        Kernel *k = &kernels[i];
        PyObject *cls = PyDict_GetItemString(classes, k->name); /* borrowed */
        if (cls == NULL || !PyType_Check(cls) ||
            !PyType_IsSubtype((PyTypeObject *)cls, &NodeBaseType)) {
            PyErr_Format(PyExc_TypeError, "install_kernels: no node class for the kernel %s",
                         k->name);
            return NULL;
        }
        Py_INCREF(cls);
        PyObject *methods[2] = {NULL, NULL};
        int installed = 0, status = 0;
        for (int m = 0; status == 0 && m < 2; m++) {
            methods[m] = PyObject_GetAttrString(cls, kernel_defs[m].ml_name);
            if (methods[m] == NULL) {
                status = -1;
            }
            else if (is_installed(methods[m], m) && (PyObject *)k->cls == cls) {
                installed++;
            }
            else if (!PyFunction_Check(methods[m])) {
                PyErr_Format(PyExc_TypeError, "install_kernels: %R.%s is not a Python function",
                             cls, kernel_defs[m].ml_name);
                status = -1;
            }
        }
        for (int m = 0; status == 0 && installed == 0 && m < 2; m++) {
            PyObject *descr = PyDescr_NewMethod((PyTypeObject *)cls, &kernel_defs[m]);
            if (descr == NULL || PyObject_SetAttrString(cls, kernel_defs[m].ml_name, descr) < 0) {
                status = -1;
            }
            Py_XDECREF(descr);
        }
        if (status == 0 && installed == 0) {
            Py_XSETREF(k->cls, (PyTypeObject *)Py_NewRef(cls));
            Py_XSETREF(k->python_forward, Py_NewRef(methods[0]));
            Py_XSETREF(k->python_backward, Py_NewRef(methods[1]));
        }
        Py_XDECREF(methods[0]);
        Py_XDECREF(methods[1]);
        Py_DECREF(cls);
        if (status < 0) {
            return NULL;
        }
        if (installed == 1) {
            PyErr_Format(PyExc_TypeError, "install_kernels: %s has one kernel method of two",
                         k->name);
            return NULL;
        }
    }
    Py_XSETREF(is_complex_python, Py_NewRef(complex_check));
    Py_XSETREF(base_get_retained_inputs, Py_NewRef(accessor));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"conjugate_if_complex", (PyCFunction)(void (*)(void))conjugate_if_complex, METH_FASTCALL,
     "conjugate_if_complex(xp, a): conj(a) for complex arrays, a for real ones, "
     "a.conjugate() for Python scalars (after install_kernels)."},
    {"install_operators", install_operators, METH_VARARGS,
     "install_operators(Variable, table, scalar_init): make the C operators Variable's +, -, "
     "* and /."},
    {"install_kernels", install_kernels, METH_VARARGS,
     "install_kernels(classes, is_complex, get_retained_inputs): make the C kernels the "
     "forward and backward of these node classes, given by name."},

    {"run", run, METH_VARARGS,
     "run(seeds, retain_grad, clear_buffer, helpers): the ordinary backward loop."},
    {"init", init, METH_VARARGS,
     "init(Variable, VariableNode, ...): keep what the fast paths use; return the method "
     "to install as FunctionNode.apply."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "agnograd._speedups",
    "The common case of FunctionNode.apply and of the backward loop, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    struct {
        PyObject **target;
        const char *text;
    } names[] = {
        {&s_forward, "forward"},
        {&s_backward, "backward"},
        {&s_differentiable, "differentiable"},
        {&s_retain_in, "_retain_in"},
        {&s_retain_out, "_retain_out"},
        {&s_shape, "shape"},
        {&s_dtype, "dtype"},
        {&s_label, "label"},
        {&s_receives_variables, "backward_receives_variables"},
        {&s_requires_grad, "requires_grad"},
        {&s_creator_node, "creator_node"},
        {&s_fn, "fn"},
        {&s_compute, "compute"},
        {&s_rule, "rule"},
        {&s_value, "value"},
        {&s_conjugate, "conjugate"},
        {&s_conj, "conj"},
        {&s_apply, "apply"},
        {&s_init, "__init__"},
        {&s_get_retained_inputs, "get_retained_inputs"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if ((*names[i].target = PyUnicode_InternFromString(names[i].text)) == NULL) {
            return NULL;
        }
    }
    array_shape.name = s_shape;
    array_dtype.name = s_dtype;
    if ((zero = PyLong_FromLong(0)) == NULL) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyType_Ready(&NodeBaseType) < 0 ||
        PyModule_AddObjectRef(module, "NodeBase", (PyObject *)&NodeBaseType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
