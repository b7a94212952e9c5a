"""Build the Cython kernels in csrc/ (metadata lives in pyproject.toml).

OpenMP is used for the row loops of ``bnpvi.kernels._local_step``, the sequence
loops of ``bnpvi.kernels._hmm`` and the document loops of ``bnpvi.kernels._topic_dense`` and
``_topic_sparse`` (results do not depend on the thread count). Set
``BNPVI_NO_OPENMP=1`` to build without it (e.g. Apple clang); the kernels then run
serially and give the same numbers. ``-ffp-contract=off``: no multiply-add is fused, also
in the AVX2 clones of the topic step's row loops (csrc/topic_dense.pyx), so every machine
gets the same bits. The two topic modules share csrc/topic_common.pxd.
"""
import os
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

use_openmp = os.environ.get("BNPVI_NO_OPENMP", "") in ("", "0") and sys.platform != "darwin"
omp_flags = ["-fopenmp"] if use_openmp else []


def kernel(name: str) -> Extension:
    """The extension ``bnpvi.kernels._<name>`` from ``csrc/<name>.pyx``."""
    return Extension(f"bnpvi.kernels._{name}", [f"csrc/{name}.pyx"], include_dirs=[np.get_include()],
                     extra_compile_args=["-O3", "-ffp-contract=off", *omp_flags], extra_link_args=omp_flags,
                     define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])


extensions = [kernel(name) for name in ("local_step", "hmm", "topic_dense", "topic_sparse", "mmsb", "gibbs",
                                               "hdp_sticks")]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=["csrc"],
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
