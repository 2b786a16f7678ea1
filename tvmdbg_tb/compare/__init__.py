"""Op-by-op comparison of two runs (two TVM builds, or a TVM build against PyTorch eager).

    from tvmdbg_tb import analysis
    result = analysis.compare("/tmp/run_fp16", "/tmp/run_fp32", rtol=1e-3, atol=1e-3)
    result["first_divergence"]["location"]   # {"file_path", "line", "function"}

Runs aligned by Relax op identity (identity.py), errors from values or statistics
(errors.py), the first divergent op (core.py).
"""

from tvmdbg_tb.compare.core import DEFAULT_ATOL, DEFAULT_RTOL, CompareError, Comparison, compare, open_run

__all__ = ["DEFAULT_ATOL", "DEFAULT_RTOL", "CompareError", "Comparison", "compare", "open_run"]
