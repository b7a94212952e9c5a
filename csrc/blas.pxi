# SciPy's BLAS (``scipy.linalg.cython_blas``), looked up at import through its capsules, so building
# needs no SciPy headers. Included by the kernels that call BLAS inside their own (OpenMP) loops; the
# Python faces keep BLAS on one thread meanwhile (``bnpvi.kernels.blas.blas_single_thread``).
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer

ctypedef void (*dgemv_t)(char*, int*, int*, double*, double*, int*, double*, int*,
                         double*, double*, int*) noexcept nogil
ctypedef void (*dgemm_t)(char*, char*, int*, int*, int*, double*, double*, int*, double*,
                         int*, double*, double*, int*) noexcept nogil
ctypedef void (*sgemm_t)(char*, char*, int*, int*, int*, float*, float*, int*, float*,
                         int*, float*, float*, int*) noexcept nogil

ctypedef void (*dpotrf_t)(char*, int*, double*, int*, int*) noexcept nogil

cdef dgemv_t _dgemv = NULL
cdef dgemm_t _dgemm = NULL
cdef sgemm_t _sgemm = NULL
cdef dpotrf_t _dpotrf = NULL   # LAPACK's Cholesky (``scipy.linalg.cython_lapack``)


cdef void* _blas_function(dict capi, str name):
    return PyCapsule_GetPointer(capi[name], PyCapsule_GetName(capi[name]))


def _load_blas():
    global _dgemv, _dgemm, _sgemm, _dpotrf
    try:
        from scipy.linalg import cython_blas
        capi = cython_blas.__pyx_capi__
        _dgemv = <dgemv_t>_blas_function(capi, "dgemv")
        _dgemm = <dgemm_t>_blas_function(capi, "dgemm")
        _sgemm = <sgemm_t>_blas_function(capi, "sgemm")
        from scipy.linalg import cython_lapack
        _dpotrf = <dpotrf_t>_blas_function(cython_lapack.__pyx_capi__, "dpotrf")
    except Exception:  # pragma: no cover - SciPy is a dependency; plain loops still work
        _dgemv = NULL
        _dgemm = NULL
        _sgemm = NULL
        _dpotrf = NULL


_load_blas()


def have_blas():
    """True when SciPy's BLAS was found."""
    return _dgemv != NULL and _dgemm != NULL and _sgemm != NULL and _dpotrf != NULL
