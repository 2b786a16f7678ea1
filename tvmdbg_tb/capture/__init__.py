"""Compile time: where the user created each Relax op, and what each build holds.

hooks.py wraps TVM's build (BlockBuilder.emit, Pass.__call__, relax.build) and describes each
executable (graphs.py: functions, kernel call sites, the Relax ops fused into each, with their
source lines); compiled.py inserts the summary kernels (kernel_source.py, epilogue.py,
inner_check.py) that let a run record its kernels' health without Python per kernel.
"""
