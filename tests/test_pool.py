"""Where the batch work runs (bnpvi.learn.pool): in this process, the same bits whatever BLAS's thread count."""
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from bnpvi.learn import runner
from bnpvi.learn.work import BatchJob
from setups import wide_points


def test_batch_work_in_this_process_does_not_depend_on_blas_threads(compose_cfg, tmp_path):
    if max((lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"), default=1) < 2:
        pytest.skip("BLAS runs on one thread here")
    cfg = compose_cfg("alg=vb", "data=hdf5", f"data.path={wide_points(tmp_path / 'x.h5')}", "obs=gauss", "init.K=25")
    run = runner.start(cfg, tmp_path / "run")
    try:
        jobs = [BatchJob(b) for b in range(run.store.n_batches)]
        results = {}
        for threads in (1, 2):
            with threadpool_limits(threads, user_api="blas"):
                results[threads] = run.pool.run(run.alg.model, run.alg.globals, jobs)
        for one, two in zip(results[1], results[2]):  # before: Sx and Sxx differed in the last bits
            for name, value in one.stats.fields.items():
                np.testing.assert_array_equal(value, two.stats.fields[name], err_msg=name)
    finally:
        run.close()
